//! The firmware extension interface: how a computational-storage system (iSSD, RecSSD, NDSearch, Cognitive SSD,
//! NICE, standard computational programs) plugs into the device.
//!
//! An extension claims vendor opcodes and declares, at attach time, which standard commands it intercepts
//! ([`Intercept`]: RecSSD's NDP flag bit, NICE's hyper-addresses); the device refuses an extension whose opcodes or
//! intercepts overlap another's, so no command silently goes to whichever was attached first. It declares its
//! compute units, and executes commands through an [`ExecCtx`](super::ExecCtx): every flash read, firmware step,
//! DRAM transfer, compute-unit busy period and host-link transfer it asks for is reserved on the same timelines as
//! ordinary I/O and charged to the same energy ledger. The computation itself runs for real on the host, in Rust, on
//! the data the device stores. Optional hooks tell it about standard writes and trims (`observe`), sectors GC moved
//! (`on_relocate`), and let it persist its state with the image (`save`/`restore`).
//!
//! Extensions are registered with [`inventory`] (`inventory::submit! { Registration { .. } }` in the extension's
//! crate), so any front end finds every linked extension by name without a hand-edited list.

use super::core::DeviceCore;
use crate::config::DeviceConfig;
use crate::ctrl::{UnitHandle, UnitSpec};
use crate::engine::{EnergyLedger, Resources, Time};
use crate::error::{Result, SimError};
use crate::ftl::Relocation;
use crate::nand::Geometry;
use crate::nvme::{opcode, DataBuf, Sqe, Status};
use std::any::Any;

/// What an extension's command returns: its status, the CQE's command-specific dword, and when the device is done
/// with it (before the completion is posted over the link).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ExtCompletion {
    pub status: Status,
    pub dw0: u32,
    pub done: Time,
}

impl ExtCompletion {
    pub fn ok(done: Time) -> Self {
        ExtCompletion { status: Status::SUCCESS, dw0: 0, done }
    }

    pub fn failed(status: Status, done: Time) -> Self {
        ExtCompletion { status, dw0: 0, done }
    }
}

/// A standard command an extension takes over (declared at attach; matched by the device).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Intercept {
    /// Every command with this opcode.
    Opcode(u8),
    /// Commands with this opcode whose command dword `dword` (10-15) has any bit of `mask` set.
    Flag { opcode: u8, dword: u8, mask: u32 },
    /// Commands with this opcode whose starting LBA (CDW10-11) is at or above `first_lba` (hyper-addresses).
    LbaFrom { opcode: u8, first_lba: u64 },
}

impl Intercept {
    fn opcode(&self) -> u8 {
        match *self {
            Intercept::Opcode(op) | Intercept::Flag { opcode: op, .. } | Intercept::LbaFrom { opcode: op, .. } => op,
        }
    }

    /// Whether `sqe` is taken by this rule.
    pub fn matches(&self, sqe: &Sqe) -> bool {
        match *self {
            Intercept::Opcode(op) => sqe.opcode == op,
            Intercept::Flag { opcode, dword, mask } => sqe.opcode == opcode && sqe.dword(dword) & mask != 0,
            Intercept::LbaFrom { opcode, first_lba } => sqe.opcode == opcode && sqe.slba() >= first_lba,
        }
    }

    /// Whether some command could match both rules. Only flags in one dword with disjoint masks are told apart; any
    /// other pair on one opcode can meet (a flagged command at a hyper-address).
    pub fn overlaps(&self, other: &Intercept) -> bool {
        if self.opcode() != other.opcode() {
            return false;
        }
        match (*self, *other) {
            (Intercept::Flag { dword: a, mask: m, .. }, Intercept::Flag { dword: b, mask: n, .. }) => a != b || m & n != 0,
            _ => true,
        }
    }

    fn check(&self) -> Result<()> {
        let bad = |why: String| Err(SimError::Config(format!("intercept {self:?}: {why}")));
        let op = self.opcode();
        if op >= opcode::IO_VENDOR_FIRST {
            return bad("vendor opcodes are claimed with claim_opcode, not intercepted".into());
        }
        match *self {
            Intercept::Flag { dword, mask, .. } if !(10..=15).contains(&dword) || mask == 0 => {
                bad("the flag must be a non-zero mask of command dword 10-15".into())
            }
            Intercept::LbaFrom { opcode: o, .. } if !matches!(o, opcode::READ | opcode::WRITE) => {
                bad("LBA ranges can be intercepted for Read and Write only".into())
            }
            _ => Ok(()),
        }
    }
}

/// A standard command the device executed, told to extensions that observe host writes (`AttachCtx::observe`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HostEvent {
    /// `nlb` blocks from `slba` were written (Write, Write Zeroes).
    Write { slba: u64, nlb: u64 },
    /// `nlb` blocks from `slba` were deallocated (Dataset Management, Write Zeroes with deallocate).
    Trim { slba: u64, nlb: u64 },
}

/// A firmware extension.
pub trait Extension: Any + Send + Sync {
    fn name(&self) -> &str;
    /// Claims opcodes and intercepts, declares compute units, resolves parameters.
    fn attach(&mut self, ctx: &mut AttachCtx<'_>) -> Result<()>;
    /// Executes a claimed or intercepted command.
    fn execute(&mut self, ctx: &mut super::ExecCtx<'_>, sqe: &Sqe, data: DataBuf<'_>) -> ExtCompletion;
    /// A standard write or trim completed (only for extensions that called `AttachCtx::observe`).
    fn observe(&mut self, _event: &HostEvent) {}
    /// GC moved sectors (only for extensions that called `AttachCtx::track_relocations`).
    fn on_relocate(&mut self, _moves: &[Relocation]) {}
    /// State to persist with the image (written at Flush, checkpoint and close; `None`: nothing to keep).
    fn save(&self) -> Option<Vec<u8>> {
        None
    }
    /// Restores what `save` returned, when the extension is attached to a reopened image.
    fn restore(&mut self, _state: &[u8]) -> Result<()> {
        Ok(())
    }
    /// Extension statistics for reports.
    fn report(&self) -> serde_json::Value {
        serde_json::Value::Null
    }
    /// Starts a new measurement window (called by `Device::reset_stats`).
    fn reset_stats(&mut self) {}
}

/// What one attached extension declared.
#[derive(Debug, Clone, Default)]
pub(crate) struct Declared {
    pub opcodes: Vec<u8>,
    pub intercepts: Vec<Intercept>,
    pub advertised_lbas: Option<u64>,
    pub observe: bool,
    pub relocations: bool,
}

/// What an extension may do when attached.
pub struct AttachCtx<'a> {
    pub(crate) core: &'a mut DeviceCore,
    pub(crate) name: String,
    pub(crate) declared: Declared,
    /// (name, declaration) of the extensions attached before.
    pub(crate) others: &'a [(String, Declared)],
}

impl AttachCtx<'_> {
    pub fn config(&self) -> &DeviceConfig {
        &self.core.cfg
    }

    /// Declares a flash scheduling class for this extension's device-internal work (`ctrl::sched`): `level` strict
    /// (urgent above normal above background), `weight` its share (1..=256) among the normal level's classes, where
    /// the host's medium-priority queues weigh 2. Its name in reports is `<extension>.<name>`. Use it per command
    /// with `ExecCtx::use_class`.
    pub fn flash_class(&mut self, name: &str, level: crate::ctrl::sched::Level, weight: u32) -> Result<crate::ctrl::sched::ClassId> {
        let spec = crate::ctrl::sched::ClassSpec { name: format!("{}.{name}", self.name), level, weight };
        self.core.sched.declare(spec)
    }

    pub fn geometry(&self) -> &Geometry {
        &self.core.nand.geo
    }

    /// A preset section `[ext.<name>]`, if the preset has one.
    pub fn section(&self, name: &str) -> Option<&toml::Table> {
        self.core.cfg.ext.get(name)?.as_table()
    }

    /// Blocks per plane reserved for extensions' physical storage (`ftl.ext_reserved_blocks`).
    pub fn reserved_blocks_per_plane(&self) -> u32 {
        self.core.ftl.reserved_per_plane()
    }

    /// Logical blocks the FTL holds (the capacity C before any `advertise_lbas`).
    pub fn lbas(&self) -> u64 {
        self.core.ftl.logical_sectors()
    }

    fn taken_by(&self, pred: impl Fn(&Declared) -> bool) -> Option<&str> {
        self.others.iter().find(|(_, d)| pred(d)).map(|(n, _)| n.as_str())
    }

    /// Claims an I/O opcode of the vendor-specific range (0x80-0xFF).
    pub fn claim_opcode(&mut self, op: u8) -> Result<()> {
        if op < opcode::IO_VENDOR_FIRST {
            return Err(SimError::Config(format!("{}: opcode {op:#04x} is not in the vendor-specific range 0x80-0xFF", self.name)));
        }
        if let Some(other) = self.taken_by(|d| d.opcodes.contains(&op)) {
            return Err(SimError::Config(format!("{}: opcode {op:#04x} is already claimed by {other}", self.name)));
        }
        if self.declared.opcodes.contains(&op) {
            return Err(SimError::Config(format!("{}: opcode {op:#04x} is claimed twice", self.name)));
        }
        self.declared.opcodes.push(op);
        Ok(())
    }

    /// Takes the standard commands `rule` matches. Refused if another extension's rule could match the same command.
    pub fn intercept(&mut self, rule: Intercept) -> Result<()> {
        rule.check().map_err(|e| SimError::Config(format!("{}: {e}", self.name)))?;
        if let Some(other) = self.taken_by(|d| d.intercepts.iter().any(|r| r.overlaps(&rule))) {
            return Err(SimError::Config(format!(
                "{}: intercept {rule:?} overlaps one of {other}'s: a command could go to either; attach only one of them",
                self.name
            )));
        }
        self.declared.intercepts.push(rule);
        Ok(())
    }

    /// Advertises `lbas` logical blocks in the namespace (at least the FTL's capacity): blocks beyond the FTL's are
    /// the extension's to intercept (NICE's hyper-addresses).
    pub fn advertise_lbas(&mut self, lbas: u64) -> Result<()> {
        let own = self.core.ftl.logical_sectors();
        if lbas < own {
            return Err(SimError::Config(format!("{}: cannot advertise {lbas} blocks, below the capacity {own}", self.name)));
        }
        if let Some(other) = self.taken_by(|d| d.advertised_lbas.is_some()) {
            return Err(SimError::Config(format!("{}: {other} already sets the advertised capacity", self.name)));
        }
        self.declared.advertised_lbas = Some(lbas);
        Ok(())
    }

    /// Asks for `Extension::observe` calls on standard writes and trims.
    pub fn observe(&mut self) {
        self.declared.observe = true;
    }

    /// Asks for `Extension::on_relocate` calls when GC moves sectors.
    pub fn track_relocations(&mut self) {
        self.declared.relocations = true;
    }

    /// Declares a group of compute units.
    pub fn add_units(&mut self, spec: &UnitSpec) -> Result<UnitHandle> {
        let c = &mut *self.core;
        c.units.declare(spec, &mut c.res, &mut c.ledger)
    }
}

/// What attaching may change in the core, kept to undo a failed attach.
pub(crate) struct AttachSnapshot {
    res: Resources,
    ledger: EnergyLedger,
    units: crate::ctrl::ComputeUnits,
}

impl AttachSnapshot {
    pub fn take(core: &DeviceCore) -> Self {
        AttachSnapshot { res: core.res.clone(), ledger: core.ledger.clone(), units: core.units.clone() }
    }

    pub fn restore(self, core: &mut DeviceCore) {
        core.res = self.res;
        core.ledger = self.ledger;
        core.units = self.units;
    }
}

/// How an extension crate makes itself known: `inventory::submit! { Registration { name, about, build } }`.
pub struct Registration {
    pub name: &'static str,
    /// One line for listings.
    pub about: &'static str,
    /// Builds the extension from JSON parameter overrides for a device with this configuration. Parameter errors
    /// surface here, before anything is attached.
    pub build: fn(&serde_json::Value, &DeviceConfig) -> Result<Box<dyn Extension>>,
}

inventory::collect!(Registration);

/// Every extension linked into this program, by name.
pub fn registered() -> Vec<&'static Registration> {
    let mut all: Vec<_> = inventory::iter::<Registration>.into_iter().collect();
    all.sort_by_key(|r| r.name);
    all
}

/// Builds the registered extension `name`.
pub fn build(name: &str, params: &serde_json::Value, cfg: &DeviceConfig) -> Result<Box<dyn Extension>> {
    let r = registered().into_iter().find(|r| r.name == name).ok_or_else(|| {
        let names: Vec<_> = registered().iter().map(|r| r.name).collect();
        SimError::Config(format!("unknown extension {name:?}; available: {names:?}"))
    })?;
    (r.build)(params, cfg)
}
