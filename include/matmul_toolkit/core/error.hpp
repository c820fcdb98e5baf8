#pragma once
/// Exceptions every library throws. `main` catches them once and prints
/// `error: <subject>: <what>`; InputError exits 2, any other Error 1.

#include <stdexcept>
#include <string>

namespace mmt::core {

/// A failure with a subject (a file, an option, a CUDA call) and a description.
class Error : public std::runtime_error {
public:
    Error(std::string subject, const std::string& what)
        : std::runtime_error(subject.empty() ? what : subject + ": " + what),
          m_subject(std::move(subject)), m_detail(what) {}

    const std::string& subject() const { return m_subject; }
    const std::string& detail() const { return m_detail; }

private:
    std::string m_subject;
    std::string m_detail;
};

/// Bad input from the user: a missing or malformed file, a wrong option value.
class InputError : public Error {
public:
    using Error::Error;
};

/// The user interrupted the work (Ctrl-C); what was finished has been saved.
class Interrupted : public Error {
public:
    explicit Interrupted(const std::string& what) : Error("", what) {}
};

/// Exit codes `main` returns.
inline constexpr int kExitOk = 0;
inline constexpr int kExitFailure = 1;
inline constexpr int kExitBadInput = 2;
inline constexpr int kExitInterrupted = 130;

}  // namespace mmt::core
