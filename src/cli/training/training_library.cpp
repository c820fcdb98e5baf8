// libmmt_train.so's entry point: the registration functions of the subcommands in this folder,
// which the binary calls only when one of them is asked for (training_commands.hpp).

#include "command.hpp"
#include "training_commands.hpp"

extern "C" __attribute__((visibility("default"))) const mmt::cli::TrainingCommands* mmt_training_commands() {
    using namespace mmt::cli;
    static const TrainingCommands commands{kTrainingCommandsVersion, &register_validate_max_autotune,
                                           &register_train,          &register_validate_model,
                                           &register_collect_and_train, &register_train_table,
                                           &register_predict_table,  &register_model_example};
    return &commands;
}
