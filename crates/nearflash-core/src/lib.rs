//! nearflash core: an emulated computational-storage SSD.
//!
//! Layers, bottom up (each a module): [`engine`] (virtual time, timelines, energy, random streams) ->
//! [`nand`] (geometry, array timing, channel bus, multi-plane, cache read, ECC) -> [`store`] (backing files) ->
//! [`ftl`] (mapping, GC, OOB) ->
//! [`image`] (the persistent device directory) -> [`ctrl`] (controller cores, DRAM, write buffer, compute units,
//! firmware extensions) -> [`nvme`] (commands, queues, status codes) -> [`host`] (link, driver stack, CPU) ->
//! [`device`] (the assembled device) and [`bench`] (fio-like workloads).

pub mod bench;
pub mod config;
pub mod ctrl;
pub mod device;
pub mod engine;
pub mod error;
pub mod ftl;
pub mod image;
pub mod host;
pub mod nand;
pub mod nvme;
pub mod store;

pub use ctrl::sched::Priority;
pub use device::{Device, DeviceOptions, Done, Latency, Report};
pub use ftl::FillPattern;

/// The firmware extension interface (what an in-storage system implements and calls), in one place.
pub mod ext {
    pub use crate::ctrl::sched::{ClassId, Level};
    pub use crate::ctrl::{UnitHandle, UnitSpec};
    pub use crate::device::ext::{build, registered, Registration};
    pub use crate::device::{
        AttachCtx, ExecCtx, ExtCompletion, Extension, FlashEnd, FlashRead, HostCtx, HostEvent, Intercept, OpClass, PageDone,
        PageRead, Placement, PhysAddr, ReadTo,
    };
    pub use crate::engine::Time;
    pub use crate::ftl::oob::SPARE_BYTES;
    pub use crate::ftl::{PageData, Relocation};
    pub use crate::nand::{EccOutcome, FastGeometry, Geometry};
    pub use crate::nvme::{DataBuf, Sqe, Status};
    pub use inventory;
}
pub use error::{Result, SimError};
