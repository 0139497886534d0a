//! Admin commands: Identify, Get Log Page and I/O queue management.

use super::Device;
use crate::error::SimError;
use crate::nvme::DataBuf;
use crate::engine::Time;
use crate::nvme::pages::{self, ControllerIdentity, SmartInfo};
use crate::nvme::{self, decode_admin, field, AdminCommand, Refusal, Sqe, Status};

impl Device {
    /// Out of `submit`'s line: inlined there, its report and log pages (about 12 KiB of locals) made every I/O
    /// command's frame that deep, three stack pages probed and touched per command (cold lines in the NBD server,
    /// whose worker threads' stacks the socket work evicts between requests).
    #[cold]
    #[inline(never)]
    pub(super) fn exec_admin(&mut self, sqe: &Sqe, data: DataBuf<'_>, t: Time) -> (Status, u32, Time) {
        let c = &mut self.core;
        let fw = c.ctrl.run(&mut c.res, &mut c.ledger, t, c.ctrl.fw_other);
        let result: Result<Option<Vec<u8>>, Refusal> = decode_admin(sqe).and_then(|cmd| match cmd {
            AdminCommand::Identify { cns, nsid } => self.identify(cns, nsid).map(Some),
            AdminCommand::GetLogPage { lid, dwords, offset } => self.log_page(lid).map(|page| {
                let start = (offset as usize).min(page.len());
                let end = (start + dwords as usize * 4).min(page.len());
                Some(page[start..end].to_vec())
            }),
            AdminCommand::CreateIoCq { qid, size } => self.queues.create_cq(qid, size).map(|_| None),
            AdminCommand::CreateIoSq { qid, size, cqid, prio } => {
                self.queues.create_sq(qid, size, cqid, prio).map(|_| self.core.fetcher.add_queue(qid, prio)).map(|_| None)
            }
            AdminCommand::DeleteIoSq { qid } => self.queues.delete_sq(qid).map(|_| self.core.fetcher.remove_queue(qid)).map(|_| None),
            AdminCommand::DeleteIoCq { qid } => self.queues.delete_cq(qid).map(|_| None),
            AdminCommand::Vendor(op) => Err(Refusal::new(Status::INVALID_OPCODE, Some(field::OPCODE), format!("vendor admin opcode {op:#04x}: no extension takes admin commands"))),
        });
        match result {
            Err(r) => {
                self.core.error_detail = Some(r.detail);
                (r.status, 0, fw)
            }
            Ok(None) => (Status::SUCCESS, 0, fw),
            Ok(Some(bytes)) => {
                let n = match data {
                    DataBuf::FromDevice(out) => {
                        let n = out.len().min(bytes.len());
                        out[..n].copy_from_slice(&bytes[..n]);
                        n
                    }
                    _ => 0,
                };
                let c = &mut self.core;
                let done = c.host.to_host(&mut c.res, &mut c.ledger, fw, n as u64);
                (Status::SUCCESS, 0, done)
            }
        }
    }

    /// What the device said about command `cid` on `sqid` that failed, read as a host library does: Get Log Page
    /// 0xC1 (error reasons) on the admin queue. `None` if the device kept no reason for it.
    pub fn error_reason(&mut self, sqid: u16, cid: u16) -> Option<String> {
        let mut page = vec![0u8; nvme::ERROR_LOG_ENTRIES * 1024];
        let dwords = (page.len() / 4 - 1) as u32;
        let sqe = Sqe { opcode: nvme::opcode::ADMIN_GET_LOG_PAGE, cdw10: u32::from(pages::LOG_VENDOR_ERROR_REASONS) | (dwords << 16), ..Sqe::default() };
        let done = self.execute(0, sqe, DataBuf::FromDevice(&mut page)).ok()?;
        if !done.status.is_success() {
            return None;
        }
        let end = page.iter().position(|&b| b == 0).unwrap_or(page.len());
        let rows: serde_json::Value = serde_json::from_slice(&page[..end]).ok()?;
        rows.as_array()?
            .iter()
            .find(|r| r["sqid"] == sqid && r["cid"] == cid)
            .and_then(|r| r["reason"].as_str().map(str::to_owned))
    }

    /// The error a host library returns for command `cid` on `sqid` that completed with `status`: named `what`,
    /// with the device's reason for it read from its error log (`error_reason`, a Get Log Page on the admin queue).
    pub fn command_error(&mut self, what: &str, sqid: u16, cid: u16, status: Status) -> SimError {
        let reason = self.error_reason(sqid, cid);
        SimError::Nvme { command: what.to_owned(), status: status.to_string(), sct: status.sct, sc: status.sc, reason }
    }

    /// `what`, followed by the device's reason for failed command `cid` on `sqid` in brackets where it gave one: the
    /// name a host library puts on the error it raises.
    pub fn explained(&mut self, what: &str, sqid: u16, cid: u16) -> String {
        match self.error_reason(sqid, cid) {
            Some(reason) => format!("{what} ({reason})"),
            None => what.to_owned(),
        }
    }

    fn identify(&self, cns: u8, nsid: u32) -> Result<Vec<u8>, Refusal> {
        let cfg = &self.core.cfg;
        match cns {
            pages::CNS_CONTROLLER => {
                let name = self.tree.meta("name").unwrap_or("custom");
                Ok(pages::identify_controller(&ControllerIdentity {
                    serial: &format!("NF{:016X}", fnv(name)),
                    model: &format!("nearflash {name}"),
                    firmware: env!("CARGO_PKG_VERSION"),
                    mdts_bytes: cfg.nvme.mdts.0,
                    max_queue_entries: cfg.nvme.max_queue_depth.0 as u32,
                }))
            }
            pages::CNS_NAMESPACE if nsid == 1 => {
                let used = (self.core.ftl.occupancy() * self.ns.lbas as f64).round() as u64;
                Ok(pages::identify_namespace(self.ns.lbas, used, cfg.ftl.sector_size.0 as u32))
            }
            pages::CNS_NAMESPACE => Err(Refusal::new(Status::INVALID_NAMESPACE, Some(field::NSID), format!("NSID = {nsid:#x}: the device has namespace 1 only"))),
            pages::CNS_ACTIVE_NAMESPACES => Ok(pages::active_namespaces()),
            _ => Err(Refusal::new(Status::INVALID_FIELD, Some(field::CDW10), format!("CNS = {cns:#04x}: Identify supports CNS 0x00, 0x01 and 0x02"))),
        }
    }

    fn log_page(&self, lid: u8) -> Result<Vec<u8>, Refusal> {
        match lid {
            pages::LOG_SMART => {
                let r = self.report();
                let c = &self.core;
                let planes = c.nand.geo.planes();
                let free: u32 = (0..planes).map(|p| c.ftl.blocks.free_blocks(p)).sum();
                let total = c.nand.geo.blocks();
                let (_, mean_wear, _) = c.ftl.blocks.wear();
                let endurance = c.cfg.nand.endurance.0.max(1) as f64;
                let count = |k: &str| r.ops.get(k).map_or(0, |o| o.count);
                let bytes = |k: &str| r.ops.get(k).map_or(0, |o| o.bytes);
                Ok(pages::smart_log(&SmartInfo {
                    available_spare_pct: (100.0 * f64::from(free) / f64::from(total.max(1))).round() as u8,
                    percentage_used: (100.0 * mean_wear / endurance).min(255.0) as u8,
                    bytes_read: bytes("read"),
                    bytes_written: bytes("write"),
                    read_commands: count("read"),
                    write_commands: count("write"),
                    busy_minutes: r.elapsed_ns / 60_000_000_000,
                    media_errors: c.media_errors,
                }))
            }
            pages::LOG_ERROR_INFO => Ok(self.errors.page()),
            pages::LOG_VENDOR_ERROR_REASONS => Ok(self.errors.reasons_page()),
            pages::LOG_VENDOR_STATS => Ok(self.report().to_json().into_bytes()),
            _ => Err(Refusal::new(Status::INVALID_LOG_PAGE, Some(field::CDW10), format!("log page {lid:#04x} is not supported"))),
        }
    }
}

fn fnv(s: &str) -> u64 {
    s.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3))
}
