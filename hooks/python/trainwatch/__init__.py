"""trainwatch: the training-side hook of trainwatch (framework events from
PyTorch training, streamed to trainwatch's metrics topic) and the
profiling configuration it carries.

    import trainwatch
    hook = trainwatch.Hook(job="resnet-42", brokers="kafka:9092",
                           profiler_config=trainwatch.ProfilerConfig())
    hook.watch(model, optimizer=opt, dataloader=loader)

Debugging collections (DebuggerHookConfig), the stop channel (stop_file,
StopTraining) and the SDK's rule helpers (trainwatch.rule_configs,
trainwatch.Rule) as the managed service's notebooks use them.

Importing this package has no side effect; a Hook without brokers or job
(arguments, or TRAINWATCH_BROKERS / TRAINWATCH_JOB) does nothing.
"""
from .profiler_config import (ConfigError, DataloaderProfilingConfig,
                              DetailedProfilingConfig, FrameworkProfile,
                              ProfilerConfig, PythonProfilingConfig)
from .debugger_config import CollectionConfig, DebuggerHookConfig
from .stop_channel import StopTraining
from .hook import Hook
from . import rule_configs
from .rule_configs import Rule

__all__ = ["Hook", "ProfilerConfig", "FrameworkProfile",
           "DetailedProfilingConfig", "DataloaderProfilingConfig",
           "PythonProfilingConfig", "ConfigError", "DebuggerHookConfig",
           "CollectionConfig", "StopTraining", "Rule", "rule_configs"]
__version__ = "0.1.0"
