//! Arrays of devices behind one shared host (issue 26; docs/arrays.md): the host model (a PCIe switch's uplink,
//! one root complex, host DRAM, host CPU cores; `host.toml` with units and sources) and the combiner that replays
//! every device's host-visible transfers through it on one array clock. The devices themselves are ordinary
//! `nearflash-core` devices, each run on its own clock (in one process or many); `nearflash.Array` drives them.

pub mod combine;
pub mod host;

pub use combine::{combine, Combined, Delivered, Direction, Shard, Transfer, Utilisation};
pub use host::{HostError, HostModel, Param, PathCost, PARAMS};
