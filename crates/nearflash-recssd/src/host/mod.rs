//! RecSSD's host side, driving a nearflash device in virtual time (paper §4.2, §5, §6).
//!
//! * [`tables`]: placing a model's tables on the device (written, or mapped and generated) and registering them.
//! * [`caches`]: the baseline's per-table host LRU and RecSSD's per-table static partition, with row values.
//! * [`jobs`]: one table's SparseLengthsSum on one SLS worker, three ways - from host DRAM, the conventional
//!   baseline (LRU, then one 4 KiB NVMe Read per missing row) and RecSSD (static partition, NDP config + result
//!   commands, host merge of partial sums) - as resumable steps on the worker's own I/O queue.
//! * [`runner`]: batches through SLS workers and the dense part, sequentially or pipelined (a pool of SLS
//!   workers = I/O queues feeding one MLP stage on the host CPU model), in a discrete-event loop over the workers'
//!   clocks so that every command is submitted at its worker's virtual time.
//!
//! Host CPU work (cache probes, sums, config building, the dense part) is charged to the host CPU model in
//! cycles; I/O submission and completion costs are the device's host stack model.

pub mod caches;
pub mod jobs;
pub mod runner;
pub mod tables;

use crate::ndp_command::NdpFault;
use nearflash_core::nvme::Status;
use nearflash_core::{Device, SimError};

/// Errors of the host library.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum HostError {
    /// The simulator refused an operation (bad queue, bad configuration).
    #[error(transparent)]
    Sim(#[from] SimError),
    /// A command completed with an error status; `reason` is the device's own (its error log), else the fault's.
    #[error("{what}: {status}{}", HostError::why(.fault, .reason).map(|w| format!(" - {w}")).unwrap_or_default())]
    Nvme { what: String, status: Status, fault: Option<NdpFault>, reason: Option<String> },
    /// Bad input.
    #[error("{0}")]
    Invalid(String),
}

/// Into the core's error kinds, for front ends: device errors keep their status (with the device's reason, else the
/// firmware's fault, as the reason), simulator errors their kind.
impl From<HostError> for SimError {
    fn from(e: HostError) -> Self {
        match e {
            HostError::Sim(s) => s,
            HostError::Nvme { what, status, fault, reason } => SimError::Nvme {
                reason: HostError::why(&fault, &reason),
                command: what,
                status: status.to_string(),
                sct: status.sct,
                sc: status.sc,
            },
            HostError::Invalid(m) => SimError::InvalidArgument(m),
        }
    }
}

impl HostError {
    /// Bad input or state reported by a layer below (layout, SLS checks, wire format).
    pub fn invalid(e: impl std::fmt::Display) -> HostError {
        HostError::Invalid(e.to_string())
    }

    /// `Ok` for a successful completion, else the error with the firmware's fault decoded from `dw0`.
    pub fn check(status: Status, dw0: u32, what: &str) -> Result<(), HostError> {
        if status.is_success() {
            Ok(())
        } else {
            Err(HostError::Nvme { what: what.to_string(), status, fault: NdpFault::from_code(dw0), reason: None })
        }
    }

    /// As [`HostError::check`] for command `cid` on `qid` of `dev`, with the device's reason for a failure read
    /// from its error log (`Device::error_reason`).
    pub fn check_on(dev: &mut Device, qid: u16, cid: u16, status: Status, dw0: u32, what: &str) -> Result<(), HostError> {
        HostError::check(status, dw0, what).map_err(|e| match e {
            HostError::Nvme { what, status, fault, .. } => HostError::Nvme { what, status, fault, reason: dev.error_reason(qid, cid) },
            other => other,
        })
    }

    /// The words of an error: the device's reason, else the fault's description.
    fn why(fault: &Option<NdpFault>, reason: &Option<String>) -> Option<String> {
        reason.clone().or_else(|| fault.map(|f| f.describe().to_string()))
    }
}
