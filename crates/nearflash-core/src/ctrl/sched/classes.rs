//! Scheduling classes: who a flash transaction is for, and how classes share a die.
//!
//! A class has a *level* and a *weight*. Levels are strict: a die issues an urgent-level transaction before any of
//! the normal level, and a background transaction only while nothing else waits for it. The classes of the normal
//! level share the die by weighted round robin: the class whose turn it is issues up to its weight in transactions
//! while it has work, then the turn passes to the next class with work (an empty class is skipped, so the shares are
//! work-conserving).

use crate::error::{Result, SimError};
use serde::Serialize;

/// The strict level of a class.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Level {
    Urgent,
    Normal,
    Background,
}

impl std::str::FromStr for Level {
    type Err = SimError;
    fn from_str(s: &str) -> Result<Level> {
        match s {
            "urgent" => Ok(Level::Urgent),
            "normal" => Ok(Level::Normal),
            "background" => Ok(Level::Background),
            _ => Err(SimError::InvalidArgument(format!("class level {s:?}: expected urgent, normal or background"))),
        }
    }
}

/// A class as declared.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ClassSpec {
    pub name: String,
    pub level: Level,
    /// Transactions per turn in the normal level's round robin (1..=256).
    pub weight: u32,
}

/// A class's index in the device's table.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct ClassId(pub u8);

/// The NVMe priority of a submission queue (Create I/O Submission Queue, QPRIO).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum Priority {
    Urgent,
    High,
    #[default]
    Medium,
    Low,
}

impl Priority {
    pub const ALL: [Priority; 4] = [Priority::Urgent, Priority::High, Priority::Medium, Priority::Low];

    /// The QPRIO field value (CDW11 bits 2:1).
    pub fn qprio(self) -> u32 {
        self as u32
    }

    pub fn from_qprio(v: u32) -> Priority {
        Priority::ALL[(v & 3) as usize]
    }

    pub fn name(self) -> &'static str {
        ["urgent", "high", "medium", "low"][self as usize]
    }

    /// The class a queue of this priority feeds (the first four classes of every table).
    pub fn class(self) -> ClassId {
        ClassId(self as u8)
    }
}

impl std::str::FromStr for Priority {
    type Err = SimError;
    fn from_str(s: &str) -> Result<Priority> {
        Priority::ALL
            .into_iter()
            .find(|p| p.name() == s)
            .ok_or_else(|| SimError::InvalidArgument(format!("priority {s:?}: expected urgent, high, medium or low")))
    }
}

/// At most this many classes (their queues are tracked in one bit mask per die).
pub const MAX_CLASSES: usize = 16;
const _: () = assert!(MAX_CLASSES <= crate::nand::CHANNEL_CLASSES, "a channel tells every class apart");

/// The device's classes: the four NVMe priorities, GC (and GC when its plane runs out of blocks), then those
/// extensions declare.
#[derive(Debug, Clone)]
pub struct ClassTable {
    specs: Vec<ClassSpec>,
    /// The classes of each level (urgent, normal, background) as bit masks.
    levels: [u32; 3],
    /// GC is at the normal level: on a channel its transfers take host-medium's turn (`on_channel`).
    gc_with_medium: bool,
}

/// GC's class and its urgent twin.
pub const GC: ClassId = ClassId(4);
pub const GC_URGENT: ClassId = ClassId(5);

impl ClassTable {
    /// `weights`: NVMe's high, medium and low weights; `gc`: GC's level (its weight is the medium queues').
    pub fn new(weights: [u32; 3], gc: Level) -> Self {
        let spec = |name: &str, level, weight| ClassSpec { name: name.into(), level, weight };
        let mut t = ClassTable {
            levels: [0; 3],
            gc_with_medium: false,
            specs: vec![
                spec("urgent", Level::Urgent, 1),
                spec("high", Level::Normal, weights[0]),
                spec("medium", Level::Normal, weights[1]),
                spec("low", Level::Normal, weights[2]),
                spec("gc", gc, weights[1]),
                spec("gc_urgent", Level::Urgent, 1),
            ],
        };
        t.relevel();
        t
    }

    fn relevel(&mut self) {
        self.levels = [0; 3];
        for (i, s) in self.specs.iter().enumerate() {
            self.levels[s.level as usize] |= 1 << i;
        }
        self.gc_with_medium = self.specs[GC.0 as usize].level == Level::Normal;
    }

    /// The class whose turn `c`'s transfers take on a channel: GC at the normal level shares host-medium's (its die
    /// turns are weighted as medium's already), so a channel with only host-medium and GC transfers waiting sends them
    /// in arrival order. MQSim weighs no GC turn on a channel either: its TSU hands the channel to the chips in turn
    /// (GC and user work differ only in a chip's own queues) and its PHY sends a waiting GC data-out after the host's.
    /// Every other class is its own.
    #[inline]
    pub fn on_channel(&self, c: ClassId) -> ClassId {
        if c == GC && self.gc_with_medium {
            Priority::Medium.class()
        } else {
            c
        }
    }

    /// Adds a class; refused if the name is taken, the weight out of 1..=256 or the table full.
    pub fn declare(&mut self, spec: ClassSpec) -> Result<ClassId> {
        if self.specs.iter().any(|s| s.name == spec.name) {
            return Err(SimError::Config(format!("flash class {:?} is already declared", spec.name)));
        }
        if !(1..=256).contains(&spec.weight) {
            return Err(SimError::Config(format!("flash class {:?}: weight {} must be 1..=256", spec.name, spec.weight)));
        }
        if spec.name.is_empty() || self.specs.len() >= MAX_CLASSES {
            return Err(SimError::Config(format!("flash class {:?}: names must be non-empty and at most {MAX_CLASSES} classes exist", spec.name)));
        }
        self.specs.push(spec);
        self.relevel();
        Ok(ClassId(self.specs.len() as u8 - 1))
    }

    pub fn len(&self) -> usize {
        self.specs.len()
    }

    pub fn is_empty(&self) -> bool {
        self.specs.is_empty()
    }

    pub fn get(&self, c: ClassId) -> &ClassSpec {
        &self.specs[c.0 as usize]
    }

    pub fn find(&self, name: &str) -> Option<ClassId> {
        self.specs.iter().position(|s| s.name == name).map(|i| ClassId(i as u8))
    }

    pub fn iter(&self) -> impl Iterator<Item = (ClassId, &ClassSpec)> {
        self.specs.iter().enumerate().map(|(i, s)| (ClassId(i as u8), s))
    }

    /// Bit mask of the classes at `level`.
    #[inline]
    pub fn mask(&self, level: Level) -> u32 {
        self.levels[level as usize]
    }

    /// The highest level among the classes in `with_work` (a non-empty bit mask), and that level's classes.
    #[inline]
    pub fn top(&self, with_work: u32) -> (Level, u32) {
        if with_work & self.levels[0] != 0 {
            (Level::Urgent, self.levels[0])
        } else if with_work & self.levels[1] != 0 {
            (Level::Normal, self.levels[1])
        } else {
            (Level::Background, self.levels[2])
        }
    }

    /// The class to serve next among `with_work` (a non-empty bit mask): the highest level with work wins; within
    /// the normal level the classes take turns by weight (`turns`); within the others `oldest(mask)` decides.
    pub fn choose(&self, with_work: u32, turns: &mut Turns, oldest: impl FnOnce(u32) -> ClassId) -> ClassId {
        match self.top(with_work) {
            (Level::Normal, level) => turns.next(with_work & level, self),
            (_, level) => oldest(with_work & level),
        }
    }
}

/// Weighted round robin over the classes of the normal level, one per die.
#[derive(Debug, Clone, Copy, Default)]
pub struct Turns {
    class: u8,
    credit: u32,
}

impl Turns {
    /// The class to serve among `with_work` (a non-empty bit mask of normal-level classes), charging its turn.
    pub fn next(&mut self, with_work: u32, table: &ClassTable) -> ClassId {
        debug_assert!(with_work != 0);
        if self.credit > 0 && with_work & (1 << self.class) != 0 {
            self.credit -= 1;
            return ClassId(self.class);
        }
        // The next class with work after the current one, cyclically (the current one itself, with a new turn, when
        // it is the only one: the walk below would come back to it).
        let n = table.len() as u32;
        let mut c = self.class as u32;
        if with_work != 1 << c {
            for _ in 0..n {
                c = if c + 1 == n { 0 } else { c + 1 };
                if with_work & (1 << c) != 0 {
                    break;
                }
            }
        }
        self.class = c as u8;
        self.credit = table.get(ClassId(c as u8)).weight - 1;
        ClassId(c as u8)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_robin_follows_the_weights_and_skips_classes_without_work() {
        let t = ClassTable::new([4, 2, 1], Level::Normal);
        let (high, medium, low) = (1u32 << 1, 1u32 << 2, 1u32 << 3);
        let mut turns = Turns::default();
        let all = high | medium | low;
        let served: Vec<u8> = (0..14).map(|_| turns.next(all, &t).0).collect();
        // high x4, medium x2, low x1, then again (class 0 is urgent, not in the mask; GC (4) has no work).
        assert_eq!(served, vec![1, 1, 1, 1, 2, 2, 3, 1, 1, 1, 1, 2, 2, 3]);
        // Work-conserving: with only low queued, low gets every turn.
        assert!((0..5).all(|_| turns.next(low, &t) == ClassId(3)));
        // A class that runs dry loses the rest of its turn.
        let mut turns = Turns::default();
        assert_eq!(turns.next(high | low, &t), ClassId(1));
        assert_eq!(turns.next(low, &t), ClassId(3));
    }

    #[test]
    fn declared_classes_are_checked() {
        let mut t = ClassTable::new([4, 2, 1], Level::Background);
        assert_eq!(t.get(GC).level, Level::Background);
        let c = t.declare(ClassSpec { name: "isc".into(), level: Level::Urgent, weight: 1 }).unwrap();
        assert_eq!((c, t.find("isc")), (ClassId(6), Some(ClassId(6))));
        assert_eq!(t.mask(Level::Urgent), 1 | 1 << 5 | 1 << 6);
        for bad in [("isc", 1), ("x", 0), ("y", 257), ("", 1)] {
            assert!(t.declare(ClassSpec { name: bad.0.into(), level: Level::Normal, weight: bad.1 }).is_err(), "{bad:?}");
        }
        for i in t.len()..MAX_CLASSES {
            t.declare(ClassSpec { name: format!("c{i}"), level: Level::Normal, weight: 1 }).unwrap();
        }
        assert!(t.declare(ClassSpec { name: "one too many".into(), level: Level::Normal, weight: 1 }).is_err());
        assert_eq!("high".parse::<Priority>().unwrap(), Priority::High);
        assert!("highest".parse::<Priority>().is_err());
        assert_eq!(Priority::from_qprio(Priority::Low.qprio()), Priority::Low);
    }
}
