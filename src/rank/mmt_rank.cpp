// libmmt_rank.so: the C boundary of include/matmul_toolkit/mmt_rank.h over rank::RankModel.
// Every function catches everything: a status and one error line come back, never an
// exception. Only the mmt_rank_* symbols are exported (mmt_rank.map).

// The API's declarations (and so its definitions) visible; everything else is hidden.
#pragma GCC visibility push(default)
#include "matmul_toolkit/mmt_rank.h"
#pragma GCC visibility pop

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <exception>
#include <functional>
#include <new>
#include <string>

#include "matmul_toolkit/core/error.hpp"
#include "rank_model.hpp"

struct mmt_rank_model {
    mmt::rank::RankModel model;
};

namespace {

/// One line into `error`: line breaks become spaces, cut to the buffer, NUL-terminated.
void write_error(char* error, size_t error_size, const std::string& message) {
    if (error == nullptr || error_size == 0) return;
    const size_t length = std::min(message.size(), error_size - 1);
    for (size_t i = 0; i < length; ++i) {
        const char c = message[i];
        error[i] = (c == '\n' || c == '\r') ? ' ' : c;
    }
    error[length] = '\0';
}

/// Runs `call`, mapping what it throws to a status and an error line.
int guarded(char* error, size_t error_size, const std::function<void()>& call) {
    write_error(error, error_size, "");
    try {
        call();
        return MMT_RANK_OK;
    } catch (const mmt::core::InputError& e) {
        write_error(error, error_size, e.what());
        return MMT_RANK_BAD_INPUT;
    } catch (const std::bad_alloc&) {
        write_error(error, error_size, "libmmt_rank: out of memory");
    } catch (const std::exception& e) {
        write_error(error, error_size, e.what());
    } catch (...) {
        write_error(error, error_size, "libmmt_rank: an unknown exception");
    }
    return MMT_RANK_ERROR;
}

/// An answer that did not fit, kept for the retry: recommend's ranking_ms differ from call to
/// call, so a recomputed answer could be longer than *needed said. Per thread, so the retry
/// must come from the thread that asked (as a caller's retry loop does).
struct PendingAnswer {
    std::uint64_t model = 0;  ///< RankModel::serial(): a closed model's address may be reused
    int function = 0;
    std::string request;
    std::string text;
};
thread_local PendingAnswer t_pending;

/// The buffer protocol: the answer and its NUL into `out` when it fits, else nothing.
/// `function` and `request` identify the question, for the retry.
int answer(const mmt::rank::RankModel& model, int function, const char* request,
           const std::function<std::string()>& make, char* out, size_t out_size, size_t* needed, char* error,
           size_t error_size) {
    if (needed != nullptr) *needed = 0;
    std::string text;
    const bool retry = t_pending.model == model.serial() && t_pending.function == function &&
                       t_pending.request == request;
    int status = guarded(error, error_size, [&] {
        if (retry) {
            text = std::move(t_pending.text);
            t_pending = PendingAnswer{};
        } else {
            text = make();
        }
    });
    if (status != MMT_RANK_OK) return status;
    const size_t size = text.size() + 1;
    if (needed != nullptr) *needed = size;
    if (out == nullptr || out_size < size) {
        write_error(error, error_size,
                    "answer: needs " + std::to_string(size) + " bytes, the buffer holds " + std::to_string(out ? out_size : 0));
        status = guarded(nullptr, 0, [&] { t_pending = PendingAnswer{model.serial(), function, request, std::move(text)}; });
        return status == MMT_RANK_OK ? MMT_RANK_BUFFER_TOO_SMALL : status;
    }
    std::memcpy(out, text.c_str(), size);
    return MMT_RANK_OK;
}

enum Function { kInfo = 1, kRecommend, kDecide };

int bad_argument(char* error, size_t error_size, const char* what) {
    write_error(error, error_size, what);
    return MMT_RANK_BAD_INPUT;
}

}  // namespace

extern "C" {

int mmt_rank_api_version(void) { return MMT_RANK_API_VERSION; }

mmt_rank_model* mmt_rank_open(const char* path, char* error, size_t error_size) {
    mmt_rank_model* opened = nullptr;
    guarded(error, error_size, [&] { opened = new mmt_rank_model{mmt::rank::RankModel(path ? path : "")}; });
    return opened;
}

void mmt_rank_close(mmt_rank_model* model) { delete model; }

int mmt_rank_info(const mmt_rank_model* model, char* out, size_t out_size, size_t* needed, char* error,
                  size_t error_size) {
    if (needed != nullptr) *needed = 0;
    if (model == nullptr) return bad_argument(error, error_size, "model: NULL (mmt_rank_open failed?)");
    return answer(model->model, kInfo, "", [&] { return model->model.info_json(); }, out, out_size, needed, error,
                  error_size);
}

int mmt_rank_recommend(mmt_rank_model* model, const char* request_json, char* out, size_t out_size, size_t* needed,
                       char* error, size_t error_size) {
    if (needed != nullptr) *needed = 0;
    if (model == nullptr) return bad_argument(error, error_size, "model: NULL (mmt_rank_open failed?)");
    if (request_json == nullptr) return bad_argument(error, error_size, "request: NULL");
    return answer(model->model, kRecommend, request_json, [&] { return model->model.recommend_json(request_json); }, out,
                  out_size, needed, error, error_size);
}

int mmt_rank_decide(mmt_rank_model* model, const char* request_json, char* out, size_t out_size, size_t* needed,
                    char* error, size_t error_size) {
    if (needed != nullptr) *needed = 0;
    if (model == nullptr) return bad_argument(error, error_size, "model: NULL (mmt_rank_open failed?)");
    if (request_json == nullptr) return bad_argument(error, error_size, "request: NULL");
    return answer(model->model, kDecide, request_json, [&] { return model->model.decide_json(request_json); }, out,
                  out_size, needed, error, error_size);
}

}  // extern "C"
