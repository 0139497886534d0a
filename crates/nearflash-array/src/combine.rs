//! The combiner: every device ran its shard on its own clock and recorded its host-visible transfers; this replays
//! them all through the shared host on one array clock, in one deterministic order (device time, device, sequence),
//! so that however the shards ran (one process, worker processes, Ray tasks) the array's figures are the same.
//!
//! Each transfer crosses FIFO stages: the switch (a fixed latency), the uplink and the root complex (each per
//! direction: PCIe is full duplex), host DRAM (both directions), then the earliest-free host core for its CPU work.
//! A stage is cut-through: a transfer starts there when it arrives and the stage is free, and ends no earlier than
//! its upstream stage ended. What this leaves out: a saturated uplink does not push back into a device's queue
//! (docs/arrays.md bounds the effect).

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use nearflash_core::ext::Time;

use crate::host::{HostError, HostModel};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    ToHost,
    ToDevice,
}

/// `nbytes` crossing a device's host link `direction`, done at `t` on the device's clock (relative to its shard's
/// start), followed by `cpu_ns` of host CPU work on those bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Transfer {
    pub t: Time,
    pub nbytes: u64,
    pub direction: Direction,
    pub cpu_ns: u64,
}

/// One device's shard: its label (unique in the array), its own finish time and its transfers in the order made.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Shard {
    pub device: usize,
    pub end: Time,
    pub transfers: Vec<Transfer>,
}

/// Busy time of each shared resource over the array's elapsed time.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Utilisation {
    pub uplink_to_host: f64,
    pub uplink_to_device: f64,
    pub root_complex_to_host: f64,
    pub root_complex_to_device: f64,
    pub host_dram: f64,
    /// Busy core-time over cores x elapsed.
    pub host_cpu: f64,
}

impl Utilisation {
    /// (name, value) in report order.
    pub fn named(&self) -> [(&'static str, f64); 6] {
        [
            ("uplink_to_host", self.uplink_to_host),
            ("uplink_to_device", self.uplink_to_device),
            ("root_complex_to_host", self.root_complex_to_host),
            ("root_complex_to_device", self.root_complex_to_device),
            ("host_dram", self.host_dram),
            ("host_cpu", self.host_cpu),
        ]
    }

    /// The busiest resource (the first of equals, in report order), or "none" when nothing was busy.
    pub fn busiest(&self) -> &'static str {
        let named = self.named();
        let mut best = named[0];
        for n in &named[1..] {
            if n.1 > best.1 {
                best = *n;
            }
        }
        if best.1 > 0.0 { best.0 } else { "none" }
    }
}

/// What the shared host did with one device's transfers.
#[derive(Debug, Clone, PartialEq)]
pub struct Delivered {
    pub device: usize,
    /// When its last transfer's bytes (and their CPU work) were done on the array clock (0 without transfers).
    pub end: Time,
    /// Mean time from a transfer's completion on the device to its delivery (0 without transfers).
    pub mean_delay_ns: f64,
    /// When each transfer was delivered (its CPU work done), in the order the shard made them: what a closed-loop
    /// host waits for before it reuses the transfer's queue slot.
    pub each: Vec<Time>,
}

/// The array's figures on its one clock.
#[derive(Debug, Clone, PartialEq)]
pub struct Combined {
    /// The latest of every device's own end and every transfer's delivery.
    pub elapsed: Time,
    pub transfers: usize,
    pub bytes_to_host: u64,
    pub bytes_to_device: u64,
    pub utilisation: Utilisation,
    /// One entry per shard, by device label.
    pub devices: Vec<Delivered>,
}

impl Combined {
    /// Bytes moved either way per ns of the array clock (= GB/s).
    pub fn throughput_gb_s(&self) -> f64 {
        if self.elapsed == Time::ZERO {
            return 0.0;
        }
        (self.bytes_to_host + self.bytes_to_device) as f64 / self.elapsed.as_ns() as f64
    }
}

/// A bandwidth server that carries one transfer at a time, in arrival order.
#[derive(Debug, Clone, Copy)]
struct Fifo {
    bytes_per_ns: f64,
    free: Time,
    busy: u64,
}

impl Fifo {
    fn new(bytes_per_ns: f64) -> Self {
        Self { bytes_per_ns, free: Time::ZERO, busy: 0 }
    }

    /// Cut-through: starts when the transfer arrives and this stage is free, ends no earlier than its upstream
    /// stage ended (a slower upstream paces it). Returns (start, end). The stage is busy for its own time carrying
    /// the bytes only: while a slower upstream paces it, it waits for them (so a fast stage behind a slow one is
    /// not reported as busy as the slow one).
    fn carry(&mut self, arrive: Time, upstream_end: Time, nbytes: u64) -> (Time, Time) {
        let start = arrive.max(self.free);
        let own = (nbytes as f64 / self.bytes_per_ns).ceil() as u64;
        let end = (start + own).max(upstream_end);
        self.busy += own;
        self.free = end;
        (start, end)
    }
}

/// Replays every shard's transfers through `host` on one array clock (every shard starts at 0). Device labels must
/// be unique and a transfer must carry at least one byte.
pub fn combine(shards: &[Shard], host: &HostModel) -> Result<Combined, HostError> {
    let mut order: Vec<(Time, usize, usize, Transfer)> = Vec::new();
    let mut labels: Vec<usize> = shards.iter().map(|s| s.device).collect();
    labels.sort_unstable();
    if let Some(w) = labels.windows(2).find(|w| w[0] == w[1]) {
        return Err(HostError(format!("two shards carry device label {}", w[0])));
    }
    for s in shards {
        for (seq, t) in s.transfers.iter().enumerate() {
            if t.nbytes == 0 {
                return Err(HostError(format!("device {}'s transfer {seq} carries no bytes", s.device)));
            }
            order.push((t.t, s.device, seq, *t));
        }
    }
    order.sort_unstable_by_key(|&(t, device, seq, _)| (t, device, seq));

    let mut uplink = [Fifo::new(host.uplink_bytes_per_ns()); 2];
    let mut root = [Fifo::new(host.root_complex_bytes_per_ns()); 2];
    let mut dram = Fifo::new(host.dram_bytes_per_ns());
    let cores = host.cpu_cores();
    let mut free_cores: BinaryHeap<Reverse<(Time, usize)>> = (0..cores).map(|c| Reverse((Time::ZERO, c))).collect();
    let mut cpu_busy: u64 = 0;
    let latency = host.switch_latency_ns();
    let index = |device: usize| labels.binary_search(&device).expect("every label is listed");
    let mut delivered = vec![Time::ZERO; labels.len()];
    let mut each: Vec<Vec<Time>> = labels.iter().map(|_| Vec::new()).collect();
    for s in shards {
        each[index(s.device)] = vec![Time::ZERO; s.transfers.len()];
    }
    let mut delay = vec![0u64; labels.len()];
    let mut bytes = [0u64; 2];
    for &(t, device, seq, tr) in &order {
        let d = tr.direction as usize;
        let (mut start, mut end) = (t + latency, t + latency);
        for stage in [&mut uplink[d], &mut root[d], &mut dram] {
            (start, end) = stage.carry(start, end, tr.nbytes);
        }
        if tr.cpu_ns > 0 {
            let Reverse((free, core)) = free_cores.pop().expect("at least one core");
            end = end.max(free) + tr.cpu_ns;
            cpu_busy += tr.cpu_ns;
            free_cores.push(Reverse((end, core)));
        }
        let i = index(device);
        delivered[i] = delivered[i].max(end);
        delay[i] += end - t;
        each[i][seq] = end;
        bytes[d] += tr.nbytes;
    }
    let elapsed = shards.iter().map(|s| s.end).chain(delivered.iter().copied()).max().unwrap_or(Time::ZERO);
    let over = |busy: f64| if elapsed > Time::ZERO { busy / elapsed.as_ns() as f64 } else { 0.0 };
    let utilisation = Utilisation {
        uplink_to_host: over(uplink[0].busy as f64),
        uplink_to_device: over(uplink[1].busy as f64),
        root_complex_to_host: over(root[0].busy as f64),
        root_complex_to_device: over(root[1].busy as f64),
        host_dram: over(dram.busy as f64),
        host_cpu: over(cpu_busy as f64 / cores as f64),
    };
    let mut devices: Vec<Delivered> = shards
        .iter()
        .map(|s| {
            let i = index(s.device);
            let n = s.transfers.len();
            let mean_delay_ns = if n > 0 { delay[i] as f64 / n as f64 } else { 0.0 };
            Delivered { device: s.device, end: delivered[i], mean_delay_ns, each: std::mem::take(&mut each[i]) }
        })
        .collect();
    devices.sort_by_key(|d| d.device);
    Ok(Combined {
        elapsed,
        transfers: order.len(),
        bytes_to_host: bytes[0],
        bytes_to_device: bytes[1],
        utilisation,
        devices,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn host(overrides: &[(&str, f64)]) -> HostModel {
        HostModel::new(&overrides.iter().map(|(n, v)| (n.to_string(), *v)).collect::<Vec<_>>()).unwrap()
    }

    fn shard(device: usize, end: u64, transfers: &[(u64, u64, Direction, u64)]) -> Shard {
        let transfers = transfers.iter().map(|&(t, nbytes, direction, cpu_ns)| Transfer { t: Time::from_ns(t), nbytes, direction, cpu_ns });
        Shard { device, end: Time::from_ns(end), transfers: transfers.collect() }
    }

    const UP: Direction = Direction::ToHost;
    const DOWN: Direction = Direction::ToDevice;

    #[test]
    fn transfers_queue_on_the_shared_uplink_in_device_time_order() {
        let h = host(&[("uplink_bandwidth", 1.0), ("root_complex_bandwidth", 100.0), ("dram_bandwidth", 100.0), ("latency", 0.0)]);
        // Two devices each deliver 1000 B at t=0 (and device 0 again at 500): at 1 B/ns the uplink carries them
        // one after another, device 0 first at equal times.
        let c = combine(&[shard(0, 0, &[(0, 1000, UP, 0), (500, 1000, UP, 0)]), shard(1, 0, &[(0, 1000, UP, 0)])], &h).unwrap();
        assert_eq!(c.elapsed.as_ns(), 3000);
        assert_eq!(c.utilisation.uplink_to_host, 1.0);
        assert_eq!(c.utilisation.busiest(), "uplink_to_host");
        assert_eq!(c.devices.iter().map(|d| d.end.as_ns()).collect::<Vec<_>>(), [3000, 2000]);
        // Device 0: delivered at 1000 (delay 1000) and 3000 (delay 2500); device 1 at 2000.
        assert_eq!(c.devices[0].mean_delay_ns, 1750.0);
        assert_eq!(c.devices[1].mean_delay_ns, 2000.0);
        let ns = |v: &[Time]| v.iter().map(|t| t.as_ns()).collect::<Vec<_>>();
        assert_eq!((ns(&c.devices[0].each), ns(&c.devices[1].each)), (vec![1000, 3000], vec![2000]));
        // Full duplex: the transfer to the device does not wait behind the one to the host on the uplink; DRAM,
        // shared by both directions, carries it in 1000 B / 100 B/ns after the first.
        let c = combine(&[shard(0, 0, &[(0, 1000, UP, 0), (0, 1000, DOWN, 0)])], &h).unwrap();
        assert_eq!(c.elapsed.as_ns(), 1010);
        assert_eq!((c.bytes_to_host, c.bytes_to_device, c.transfers), (1000, 1000, 2));
        // DRAM carried 2 x 1000 B at 100 B/ns: busy 20 ns, though the uplink paced it for 1010 ns; the uplink is
        // the busiest, not DRAM.
        assert_eq!(c.utilisation.host_dram, 20.0 / 1010.0);
        assert_eq!(c.utilisation.busiest(), "uplink_to_host");
    }

    #[test]
    fn nothing_busy_names_no_resource() {
        assert_eq!(Utilisation::default().busiest(), "none");
        let c = combine(&[shard(0, 500, &[])], &host(&[])).unwrap();
        assert_eq!(c.utilisation.busiest(), "none");
    }

    #[test]
    fn host_cores_are_shared_earliest_free_first() {
        let h = host(&[("cpu_cores", 2.0), ("latency", 0.0)]);
        let shards: Vec<Shard> = (0..3).map(|d| shard(d, 0, &[(0, 8, UP, 1000)])).collect();
        let c = combine(&shards, &h).unwrap();
        assert_eq!(c.elapsed.as_ns(), 2001); // two run at once, the third waits for a core
        assert_eq!(c.utilisation.host_cpu, 3000.0 / 2.0 / 2001.0);
    }

    #[test]
    fn the_switch_latency_and_a_devices_own_end_count() {
        let h = host(&[("uplink_bandwidth", 1.0), ("latency", 150.0)]);
        let c = combine(&[shard(4, 10_000, &[(0, 100, UP, 0)]), shard(2, 0, &[])], &h).unwrap();
        assert_eq!(c.devices[1].end.as_ns(), 250); // label 4 sorts after 2
        assert_eq!(c.elapsed.as_ns(), 10_000);
        assert_eq!((c.devices[0].device, c.devices[0].end, c.devices[0].mean_delay_ns), (2, Time::ZERO, 0.0));
        assert_eq!(c.throughput_gb_s(), 0.01);
        let empty = combine(&[], &h).unwrap();
        assert_eq!((empty.elapsed, empty.throughput_gb_s(), empty.utilisation.host_cpu), (Time::ZERO, 0.0, 0.0));
    }

    #[test]
    fn duplicate_labels_and_empty_transfers_are_refused() {
        let h = host(&[]);
        assert!(combine(&[shard(1, 0, &[]), shard(1, 0, &[])], &h).unwrap_err().0.contains("label 1"));
        assert!(combine(&[shard(0, 0, &[(0, 0, UP, 0)])], &h).unwrap_err().0.contains("no bytes"));
    }

    mod props {
        use super::*;
        use proptest::prelude::*;

        fn shards() -> impl Strategy<Value = Vec<Shard>> {
            let transfer = (0u64..100_000, 1u64..1 << 20, any::<bool>(), 0u64..50_000).prop_map(|(t, nbytes, down, cpu_ns)| {
                Transfer { t: Time::from_ns(t), nbytes, direction: if down { DOWN } else { UP }, cpu_ns }
            });
            prop::collection::vec((0u64..200_000, prop::collection::vec(transfer, 0..20)), 1..6).prop_map(|v| {
                v.into_iter().enumerate().map(|(device, (end, transfers))| Shard { device, end: Time::from_ns(end), transfers }).collect()
            })
        }

        proptest! {
            /// The order shards arrive in (which worker finished first) changes nothing; nothing is delivered
            /// before it was done, bytes are conserved and no resource is busier than the whole run.
            #[test]
            fn the_combination_is_order_free_and_bounded(shards in shards(), rotate in 0usize..6) {
                let h = host(&[("uplink_bandwidth", 0.5), ("cpu_cores", 2.0)]);
                let c = combine(&shards, &h).unwrap();
                let mut turned = shards.clone();
                let k = rotate % turned.len();
                turned.rotate_left(k);
                prop_assert_eq!(&combine(&turned, &h).unwrap(), &c);
                let sent: u64 = shards.iter().flat_map(|s| &s.transfers).map(|t| t.nbytes).sum();
                prop_assert_eq!(c.bytes_to_host + c.bytes_to_device, sent);
                for (s, d) in shards.iter().zip(&c.devices) {
                    let last = s.transfers.iter().map(|t| t.t).max();
                    prop_assert!(last.is_none_or(|l| d.end > l) && c.elapsed >= d.end.max(s.end));
                    prop_assert!(s.transfers.iter().zip(&d.each).all(|(t, &e)| e > t.t && e <= d.end));
                    prop_assert_eq!(d.each.len(), s.transfers.len());
                }
                for (name, u) in c.utilisation.named() {
                    prop_assert!((0.0..=1.0).contains(&u), "{} = {}", name, u);
                }
            }
        }
    }
}
