"""Standard computational programs: the NVMe Computational Programs 1.0 and Subsystem Local Memory 1.0 command
sets on any preset (the ``programs`` extension). Write a function in C, compile it with clang
(:func:`compile_c`), then ``load`` -> ``activate`` -> ``copy_to_slm`` (flash into Subsystem Local Memory) ->
``execute`` -> ``read_slm``. Programs are eBPF, run by an interpreter that counts every instruction; the count is
charged on the preset's controller cores. docs/programs.md maps every command and field to the specifications."""

from nearflash.programs.api import (
    HOST_RUN_MAX_BYTES,
    ExecuteResult,
    ProgramError,
    activate,
    copy_to_slm,
    create_range_set,
    delete_range_set,
    device_program,
    execute,
    host_run,
    host_runs,
    identify,
    load,
    read_slm,
    run_local,
    unload,
    write_slm,
)
from nearflash.programs.build import EXAMPLES, compile_c, example, have_clang

__all__ = [
    "EXAMPLES",
    "HOST_RUN_MAX_BYTES",
    "ExecuteResult",
    "ProgramError",
    "activate",
    "compile_c",
    "copy_to_slm",
    "create_range_set",
    "delete_range_set",
    "device_program",
    "example",
    "execute",
    "have_clang",
    "host_run",
    "host_runs",
    "identify",
    "load",
    "read_slm",
    "run_local",
    "unload",
    "write_slm",
]
