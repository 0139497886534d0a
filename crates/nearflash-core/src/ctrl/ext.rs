//! The firmware extension interface: how a computational-storage system (iSSD, RecSSD, NDSearch, Cognitive SSD,
//! NICE) plugs into the device.
//!
//! An extension claims vendor opcodes (or intercepts standard commands, e.g. RecSSD's NDP flag bit or NICE's
//! hyper-addresses), declares its compute units, and executes commands through an [`ExecCtx`]: every flash read,
//! firmware step, DRAM transfer, compute-unit busy period and host-link transfer it asks for is reserved on the
//! same timelines as ordinary I/O and charged to the same energy ledger. The computation itself runs for real on
//! the host, in Rust, on the data the device stores.

use super::UnitHandle;
use crate::config::DeviceConfig;
use crate::device::{DeviceCore, OpClass};
use crate::engine::{Rng, Time};
use crate::error::Result;
use crate::nand::Geometry;
use crate::nvme::{Sqe, Status};

/// The data buffer of a command (the host memory its PRPs point at).
pub enum DataBuf<'a> {
    None,
    /// Host-to-device data (writes).
    ToDevice(&'a [u8]),
    /// Device-to-host data (reads).
    FromDevice(&'a mut [u8]),
}

impl DataBuf<'_> {
    pub fn len(&self) -> usize {
        match self {
            DataBuf::None => 0,
            DataBuf::ToDevice(b) => b.len(),
            DataBuf::FromDevice(b) => b.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// What an extension's command returns: its status, the CQE's command-specific dword, and when the device is done
/// with it (before the completion is posted over the link).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ExtCompletion {
    pub status: Status,
    pub dw0: u32,
    pub done: Time,
}

/// One flash page's part of a [`FlashRead`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PageDone {
    /// First LBA of the read served by this page.
    pub lba: u64,
    pub sectors: u32,
    /// Byte offset of those sectors in the output buffer.
    pub offset: usize,
    pub channel: u32,
    pub die: u32,
    /// When the page's data is decoded in the controller (buffered or unmapped sectors: when looked up).
    pub done: Time,
}

/// The outcome of reading LBAs into controller memory.
#[derive(Debug, Clone, Default)]
pub struct FlashRead {
    pub done: Time,
    pub pages: Vec<PageDone>,
}

/// A firmware extension.
pub trait Extension: Send + Sync {
    fn name(&self) -> &str;
    /// Claims opcodes and declares compute units.
    fn attach(&mut self, ctx: &mut AttachCtx<'_>) -> Result<()>;
    /// Whether this extension takes a command that uses a standard I/O opcode.
    fn intercepts(&self, _sqe: &Sqe) -> bool {
        false
    }
    /// Executes a claimed or intercepted command.
    fn execute(&mut self, ctx: &mut ExecCtx<'_>, sqe: &Sqe, data: DataBuf<'_>) -> ExtCompletion;
    /// Extension statistics for reports.
    fn report(&self) -> serde_json::Value {
        serde_json::Value::Null
    }
    /// Starts a new measurement window (called by `Device::reset_stats`).
    fn reset_stats(&mut self) {}
}

/// What an extension may do when attached.
pub struct AttachCtx<'a> {
    pub(crate) core: &'a mut DeviceCore,
    pub(crate) claimed: Vec<u8>,
    pub(crate) taken: &'a [Option<usize>],
}

impl AttachCtx<'_> {
    pub fn config(&self) -> &DeviceConfig {
        &self.core.cfg
    }

    /// The extension's own preset section (`[ext.<name>]`), if the preset has one.
    pub fn section(&self, name: &str) -> Option<&toml::Table> {
        self.core.cfg.ext.get(name)?.as_table()
    }

    /// Claims an I/O opcode of the vendor-specific range (0x80-0xFF).
    pub fn claim_opcode(&mut self, opcode: u8) -> Result<()> {
        use crate::error::SimError;
        if opcode < crate::nvme::opcode::IO_VENDOR_FIRST {
            return Err(SimError::Config(format!("opcode {opcode:#04x} is not in the vendor-specific range 0x80-0xFF")));
        }
        let i = usize::from(opcode - crate::nvme::opcode::IO_VENDOR_FIRST);
        if self.taken[i].is_some() || self.claimed.contains(&opcode) {
            return Err(SimError::Config(format!("opcode {opcode:#04x} is already claimed")));
        }
        self.claimed.push(opcode);
        Ok(())
    }

    /// Declares a group of compute units.
    pub fn add_units(&mut self, spec: &super::UnitSpec) -> Result<UnitHandle> {
        let c = &mut *self.core;
        c.units.declare(spec, &mut c.res, &mut c.ledger)
    }
}

/// What an extension may do while executing a command.
pub struct ExecCtx<'a> {
    pub(crate) core: &'a mut DeviceCore,
    /// When the firmware has fetched and decoded the command.
    pub start: Time,
    pub(crate) accounted_as: Option<(OpClass, u64)>,
}

impl ExecCtx<'_> {
    /// Counts this command in the report as `class` moving `bytes` (e.g. an intercepted standard Read that the
    /// extension served as an ordinary read); by default extension commands count as vendor commands of 0 bytes.
    pub fn account_as(&mut self, class: OpClass, bytes: u64) {
        self.accounted_as = Some((class, bytes));
    }

    pub fn config(&self) -> &DeviceConfig {
        &self.core.cfg
    }

    pub fn geometry(&self) -> &Geometry {
        &self.core.nand.geo
    }

    /// Bytes per logical block.
    pub fn lba_bytes(&self) -> u64 {
        u64::from(self.core.nand.geo.sector_size)
    }

    /// Logical blocks of the namespace.
    pub fn lbas(&self) -> u64 {
        self.core.ftl.logical_sectors()
    }

    /// Reads `nlb` blocks from `slba` through the FTL into controller memory (`out`), from `ready`. Fails with
    /// LBA Out of Range or Unrecovered Read Error.
    pub fn flash_read(&mut self, slba: u64, nlb: u32, ready: Time, out: &mut [u8]) -> std::result::Result<FlashRead, Status> {
        self.core.read_lbas(slba, nlb, ready, out, true)
    }

    /// As `flash_read`, but the per-page flash transactions are not charged to the controller cores: for firmware
    /// whose own units sequence the flash (iSSD's per-channel FMCs).
    pub fn flash_read_self_sequenced(
        &mut self,
        slba: u64,
        nlb: u32,
        ready: Time,
        out: &mut [u8],
    ) -> std::result::Result<FlashRead, Status> {
        self.core.read_lbas(slba, nlb, ready, out, false)
    }

    /// Writes blocks through the write buffer and FTL (e.g. results kept on flash); returns when buffered.
    pub fn write_lbas(&mut self, slba: u64, data: &[u8], ready: Time) -> std::result::Result<Time, Status> {
        self.core.write_lbas(slba, data, ready)
    }

    /// The physical sector address of an LBA, if it is on flash (firmware that bypasses the FTL at run time).
    pub fn physical_of(&self, lba: u64) -> Option<u64> {
        match self.core.ftl.locate(u32::try_from(lba).ok()?) {
            crate::ftl::Location::Flash(psa) => Some(psa),
            _ => None,
        }
    }

    /// Senses physical page `ppn` and moves `xfer_bytes` of it over the channel (0 for compute beside the die,
    /// e.g. NDSearch's search-in-NAND); returns when the data is in the controller (or the page register).
    pub fn read_physical(&mut self, ppn: u64, xfer_bytes: u64, ready: Time) -> Time {
        self.core.read_physical(ppn, xfer_bytes, ready)
    }

    /// Runs firmware instructions on whichever controller core is free first.
    pub fn firmware(&mut self, ready: Time, instructions: f64) -> Time {
        let c = &mut *self.core;
        c.ctrl.run(&mut c.res, &mut c.ledger, ready, instructions)
    }

    /// Runs firmware instructions on one specific controller core.
    pub fn firmware_on(&mut self, core: u32, ready: Time, instructions: f64) -> Time {
        let c = &mut *self.core;
        c.ctrl.run_on(&mut c.res, &mut c.ledger, core, ready, instructions)
    }

    /// Moves bytes through controller DRAM.
    pub fn dram(&mut self, ready: Time, bytes: u64) -> Time {
        let c = &mut *self.core;
        c.ctrl.dram(&mut c.res, &mut c.ledger, ready, bytes)
    }

    /// Device-to-host transfer over the link.
    pub fn to_host(&mut self, ready: Time, bytes: u64) -> Time {
        let c = &mut *self.core;
        c.host.to_host(&mut c.res, &mut c.ledger, ready, bytes)
    }

    /// Host-to-device transfer over the link.
    pub fn from_host(&mut self, ready: Time, bytes: u64) -> Time {
        let c = &mut *self.core;
        c.host.to_device(&mut c.res, &mut c.ledger, ready, bytes)
    }

    /// Busies compute unit `member` of `unit` for `cycles`.
    pub fn compute(&mut self, unit: UnitHandle, member: u32, ready: Time, cycles: f64) -> Time {
        let c = &mut *self.core;
        c.units.run(unit, member, &mut c.res, &mut c.ledger, ready, cycles)
    }

    /// Charges extra dynamic energy to a named account.
    pub fn charge(&mut self, account: &str, picojoules: f64) {
        let a = self.core.ledger.account(account);
        self.core.ledger.charge(a, picojoules);
    }

    /// Host CPU work done on behalf of the command (partitioned jobs).
    pub fn host_compute(&mut self, ready: Time, cycles: f64, instructions: f64, cores: u32) -> Time {
        let c = &mut *self.core;
        c.host.compute(&mut c.res, &mut c.ledger, ready, cycles, instructions, cores)
    }

    /// The extension's random stream (seeded from the device seed).
    pub fn rng(&mut self) -> &mut Rng {
        &mut self.core.ext_rng
    }

    /// Extension spare bytes in a page's OOB record.
    pub fn oob_ext(&self, ppn: u64) -> &[u8] {
        self.core.ftl.oob_ext(ppn)
    }

    pub fn oob_ext_mut(&mut self, ppn: u64) -> &mut [u8] {
        self.core.ftl.oob_ext_mut(ppn)
    }
}
