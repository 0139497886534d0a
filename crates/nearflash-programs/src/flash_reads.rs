//! Where a program's flash reads are charged in storage: the device's flash path through the FTL
//! (`ExecCtx::flash_read_reporting`: mapping lookups, the scheduler's queues in the program's flash class, ECC
//! with its outcome per page, controller DRAM), and its instructions on the controller cores. The rules of the
//! reads and the run's time are `program::reads`; this is the one place that books them on the device.

use crate::program::reads::ReadPath;
use crate::program::Fault;
use nearflash_core::ext::{ExecCtx, ReadTo, Time};

/// A run's reads and instructions, on the device.
pub struct DeviceReads<'c, 'x> {
    pub ctx: &'c mut ExecCtx<'x>,
    /// Controller instructions per eBPF instruction.
    pub native_per_ebpf: f64,
}

impl ReadPath for DeviceReads<'_, '_> {
    fn lba_bytes(&self) -> u64 {
        self.ctx.lba_bytes()
    }

    fn compute(&mut self, ready: Time, instructions: u64) -> Time {
        self.ctx.firmware(ready, instructions as f64 * self.native_per_ebpf)
    }

    fn read(&mut self, ready: Time, slba: u64, nlb: u32, out: &mut [u8]) -> Result<(Time, Option<u32>), Fault> {
        // Into controller DRAM, read out once by the core running the program.
        let r = self
            .ctx
            .flash_read_reporting(ready, slba, nlb, ReadTo::Dram, out)
            .map_err(|s| Fault::Other(format!("the flash read of LBAs {slba} + {nlb} failed: {}", s.name())))?;
        let lost = r.pages.iter().any(|p| !p.ecc.is_ok());
        Ok((r.done, if lost { None } else { Some(r.pages.iter().map(|p| p.ecc.retries()).max().unwrap_or(0)) }))
    }
}
