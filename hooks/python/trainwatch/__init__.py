"""trainwatch: the training-side hook of trainwatch (framework events from
PyTorch training, streamed to trainwatch's metrics topic) and the
profiling configuration it carries.

    import trainwatch
    hook = trainwatch.Hook(job="resnet-42", brokers="kafka:9092",
                           profiler_config=trainwatch.ProfilerConfig())
    hook.watch(model, optimizer=opt, dataloader=loader)

Importing this package has no side effect; a Hook without brokers or job
(arguments, or TRAINWATCH_BROKERS / TRAINWATCH_JOB) does nothing.
"""
from .profiler_config import (ConfigError, DataloaderProfilingConfig,
                              DetailedProfilingConfig, FrameworkProfile,
                              ProfilerConfig, PythonProfilingConfig)
from .hook import Hook

__all__ = ["Hook", "ProfilerConfig", "FrameworkProfile",
           "DetailedProfilingConfig", "DataloaderProfilingConfig",
           "PythonProfilingConfig", "ConfigError"]
__version__ = "0.1.0"
