"""Block export over NBD: `nearflash serve DEVICE` exports an emulated device to unmodified clients (nbdinfo,
nbdcopy, qemu-img, fio's nbd engine, nbdfuse, the kernel's nbd driver) through nbdkit and our Rust plugin
(crates/nearflash-nbd); see docs/nbd.md.
"""

from nearflash.nbd.launch import ServeOptions, command, serve, status

__all__ = ["ServeOptions", "command", "serve", "status"]
