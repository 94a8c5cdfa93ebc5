//! Public value types of the engine API.

use serde::{Deserialize, Serialize};

/// Inode number. The root directory is [`ROOT_INO`].
pub type Ino = u64;

/// Inode number of the root directory.
pub const ROOT_INO: Ino = 1;

/// Maximum file name length in bytes.
pub const NAME_MAX: usize = 255;

/// Maximum symlink target length in bytes (one page).
pub const SYMLINK_MAX: usize = 4095;

/// File type, as stored in the inode (the `S_IFMT` bits of the mode).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum FileKind {
    /// Regular file.
    Regular,
    /// Directory.
    Directory,
    /// Symbolic link.
    Symlink,
    /// Named pipe.
    Fifo,
    /// Unix domain socket.
    Socket,
    /// Character device.
    CharDevice,
    /// Block device.
    BlockDevice,
}

impl FileKind {
    /// `S_IFMT` bits for this kind.
    pub fn mode_bits(self) -> u32 {
        match self {
            FileKind::Regular => libc::S_IFREG,
            FileKind::Directory => libc::S_IFDIR,
            FileKind::Symlink => libc::S_IFLNK,
            FileKind::Fifo => libc::S_IFIFO,
            FileKind::Socket => libc::S_IFSOCK,
            FileKind::CharDevice => libc::S_IFCHR,
            FileKind::BlockDevice => libc::S_IFBLK,
        }
    }

    /// Kind from the `S_IFMT` bits of a mode; `None` for an unknown type.
    pub fn from_mode(mode: u32) -> Option<FileKind> {
        match mode & libc::S_IFMT {
            libc::S_IFREG => Some(FileKind::Regular),
            libc::S_IFDIR => Some(FileKind::Directory),
            libc::S_IFLNK => Some(FileKind::Symlink),
            libc::S_IFIFO => Some(FileKind::Fifo),
            libc::S_IFSOCK => Some(FileKind::Socket),
            libc::S_IFCHR => Some(FileKind::CharDevice),
            libc::S_IFBLK => Some(FileKind::BlockDevice),
            _ => None,
        }
    }

    /// The `d_type` value readdir reports (DT_*).
    pub fn dirent_type(self) -> u8 {
        match self {
            FileKind::Regular => libc::DT_REG,
            FileKind::Directory => libc::DT_DIR,
            FileKind::Symlink => libc::DT_LNK,
            FileKind::Fifo => libc::DT_FIFO,
            FileKind::Socket => libc::DT_SOCK,
            FileKind::CharDevice => libc::DT_CHR,
            FileKind::BlockDevice => libc::DT_BLK,
        }
    }
}

/// A point in time with nanoseconds (seconds since the epoch).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Timespec {
    /// Seconds since the epoch (negative before it).
    pub sec: i64,
    /// Nanoseconds, `0..1_000_000_000`.
    pub nsec: u32,
}

impl Timespec {
    /// The time stamped on inodes: the coarse real-time clock (updated once per
    /// kernel tick, a few ms), as Linux file systems stamp theirs (`current_time()`
    /// reads the coarse clock). It costs a few ns instead of a full clock read,
    /// which matters on the small-write path.
    pub fn now() -> Timespec {
        let mut ts = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: clock_gettime writes into the provided, valid timespec.
        let rc = unsafe { libc::clock_gettime(libc::CLOCK_REALTIME_COARSE, &mut ts) };
        if rc != 0 {
            // SAFETY: as above (kernels without the coarse clock).
            unsafe { libc::clock_gettime(libc::CLOCK_REALTIME, &mut ts) };
        }
        Timespec {
            sec: ts.tv_sec,
            nsec: ts.tv_nsec as u32,
        }
    }
}

/// Attributes of an inode.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Attr {
    /// Inode number.
    pub ino: Ino,
    /// File type.
    pub kind: FileKind,
    /// Full mode, including the `S_IFMT` bits.
    pub mode: u32,
    /// Link count.
    pub nlink: u32,
    /// Owner.
    pub uid: u32,
    /// Group.
    pub gid: u32,
    /// Size in bytes.
    pub size: u64,
    /// 4 KiB data pages allocated to the file.
    pub blocks: u64,
    /// Device number of a device file (0 otherwise).
    pub rdev: u32,
    /// Last access.
    pub atime: Timespec,
    /// Last change of the contents.
    pub mtime: Timespec,
    /// Last change of the inode (contents or attributes).
    pub ctime: Timespec,
    /// Generation of the inode number: how many files had it before (export
    /// handles name the inode by number and generation).
    pub generation: u32,
    /// Birth time: when the inode was made (`None` where the image does not record
    /// it: format versions before 10).
    pub btime: Option<Timespec>,
}

/// A change of attributes; `None` leaves a field as it is. `ctime` is set to now on
/// any change unless given.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SetAttr {
    /// Permission bits (the `S_IFMT` bits are ignored).
    pub mode: Option<u32>,
    /// New owner.
    pub uid: Option<u32>,
    /// New group.
    pub gid: Option<u32>,
    /// New size: truncates or extends with zeros.
    pub size: Option<u64>,
    /// New access time.
    pub atime: Option<Timespec>,
    /// New modification time.
    pub mtime: Option<Timespec>,
    /// New change time (default: now, if anything changes).
    pub ctime: Option<Timespec>,
    /// `atime`/`mtime` are the current time, not times the caller chose
    /// (`utimes(path, NULL)`, `UTIME_NOW`; Linux's `ATTR_TOUCH`): allowed on an
    /// append-only inode, where chosen times are not.
    pub times_now: bool,
}

/// A node to create ([`FileSystem::create_node`](crate::FileSystem::create_node)).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct NewNode {
    /// File type (`S_IFMT` bits: regular, directory, fifo, socket, device) and
    /// permission bits as the caller asked for them (umask not applied).
    pub mode: u32,
    /// The creating process's umask: applied unless the parent directory has a
    /// default ACL, which then decides the new node's ACL and mode instead (POSIX).
    pub umask: u32,
    /// Device number of a device node.
    pub rdev: u32,
    /// Owner.
    pub uid: u32,
    /// Group (a set-group-ID parent gives its own instead).
    pub gid: u32,
}

/// Flags of `rename`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RenameFlags {
    /// Fail with EEXIST if the target exists.
    pub noreplace: bool,
    /// Atomically exchange source and target (both must exist).
    pub exchange: bool,
    /// RENAME_WHITEOUT: in the same commit, the source name becomes a whiteout (a
    /// character device 0/0, mode 0) owned by this (uid, gid) — what overlayfs asks
    /// of an upper directory.
    pub whiteout: Option<(u32, u32)>,
}

/// One directory entry as readdir returns it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DirEntry {
    /// Inode the name refers to.
    pub ino: Ino,
    /// Offset to pass to the next readdir call to continue after this entry. Offsets
    /// are stable: an entry keeps its offset for as long as it exists.
    pub offset: u64,
    /// File type of the inode.
    pub kind: FileKind,
    /// The name (bytes, no NUL).
    pub name: Vec<u8>,
}

/// File system statistics (statfs).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct StatFs {
    /// Block size in bytes.
    pub block_size: u32,
    /// Blocks of the image.
    pub blocks: u64,
    /// Free blocks.
    pub blocks_free: u64,
    /// Free blocks available to unprivileged users.
    pub blocks_avail: u64,
    /// Inodes.
    pub files: u64,
    /// Free inodes.
    pub files_free: u64,
    /// Maximum name length in bytes.
    pub name_max: u32,
}

/// Which per-file lock protects file data (DESIGN.md §4, §8).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub enum LockMode {
    /// One reader-writer lock per inode (NOVA's baseline).
    #[default]
    Inode,
    /// pNOVA: an augmented interval tree of byte ranges per file, under one mutex.
    Interval,
    /// pNOVA: one atomic lock word per segment of the file (`segment_size`).
    Segment,
}

impl LockMode {
    /// Every mode with its name (as `mount --lock` takes it).
    pub const ALL: &'static [(&'static str, LockMode)] = &[
        ("inode", LockMode::Inode),
        ("interval", LockMode::Interval),
        ("segment", LockMode::Segment),
    ];

    /// The mode's name.
    pub fn name(self) -> &'static str {
        match self {
            LockMode::Inode => "inode",
            LockMode::Interval => "interval",
            LockMode::Segment => "segment",
        }
    }
}

/// Inode flags (`FS_IOC_GETFLAGS`/`SETFLAGS`, `chattr`), Linux's `FS_*_FL` values.
/// Kept in the inode's log (docs/FORMAT.md §2.9, format version 8).
pub mod inode_flags {
    /// `S`: changes are synchronous (every change is anyway).
    pub const SYNC: u32 = 0x0000_0008;
    /// `i`: no change to the file: its data, attributes, names or links.
    pub const IMMUTABLE: u32 = 0x0000_0010;
    /// `a`: data only appended; no truncate, rename, removal or link.
    pub const APPEND: u32 = 0x0000_0020;
    /// `d`: not for dump(8).
    pub const NODUMP: u32 = 0x0000_0040;
    /// `A`: reads do not update its atime.
    pub const NOATIME: u32 = 0x0000_0080;
    /// `D`: directory changes are synchronous (directories only; every change is
    /// anyway).
    pub const DIRSYNC: u32 = 0x0001_0000;
    /// Every flag mnemofs keeps.
    pub const SUPPORTED: u32 = SYNC | IMMUTABLE | APPEND | NODUMP | NOATIME | DIRSYNC;
    /// The flags that forbid changes to the inode itself.
    pub const LOCKED: u32 = IMMUTABLE | APPEND;
}

/// When reads update a file's access time (the mount options of the same names).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub enum AtimeMode {
    /// `relatime` (Linux's default): a read updates atime when it is not newer than
    /// mtime or ctime, or is a day old.
    #[default]
    Relatime,
    /// `noatime`: reads never update atime.
    Noatime,
    /// `strictatime`: every read updates atime.
    Strictatime,
}

impl AtimeMode {
    /// Every mode with its mount-option name.
    pub const ALL: &'static [(&'static str, AtimeMode)] = &[
        ("relatime", AtimeMode::Relatime),
        ("noatime", AtimeMode::Noatime),
        ("strictatime", AtimeMode::Strictatime),
    ];

    /// The mode a mount option names.
    pub fn by_name(name: &str) -> Option<AtimeMode> {
        Self::ALL.iter().find(|(n, _)| *n == name).map(|(_, m)| *m)
    }

    /// The mode as one byte (for a mode that changes while mounted).
    pub(crate) fn to_u8(self) -> u8 {
        match self {
            AtimeMode::Relatime => 0,
            AtimeMode::Noatime => 1,
            AtimeMode::Strictatime => 2,
        }
    }

    /// The mode [`to_u8`](Self::to_u8) gave `v` (relatime for anything else).
    pub(crate) fn from_u8(v: u8) -> AtimeMode {
        match v {
            1 => AtimeMode::Noatime,
            2 => AtimeMode::Strictatime,
            _ => AtimeMode::Relatime,
        }
    }
}

/// How sub-page writes reach PM (DESIGN.md §8).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub enum SmallWriteMode {
    /// Page copy-on-write: partial pages are merged into fresh pages.
    #[default]
    Cow,
    /// Fine-grained redo log: the data is logged, then written in place (baseline).
    Finelog,
    /// LAWN alternate writing between a zone slot and the file page.
    Lawn,
    /// LAWN on PM, page CoW on DRAM ([`crate::medium`]; resolved at mount).
    Auto,
}

impl SmallWriteMode {
    /// Every mode with its name (as `mount --small-write` takes it).
    pub const ALL: &'static [(&'static str, SmallWriteMode)] = &[
        ("cow", SmallWriteMode::Cow),
        ("finelog", SmallWriteMode::Finelog),
        ("lawn", SmallWriteMode::Lawn),
        ("auto", SmallWriteMode::Auto),
    ];

    /// The mode's name.
    pub fn name(self) -> &'static str {
        match self {
            SmallWriteMode::Cow => "cow",
            SmallWriteMode::Finelog => "finelog",
            SmallWriteMode::Lawn => "lawn",
            SmallWriteMode::Auto => "auto",
        }
    }
}

/// Whether reads go through a DRAM read cache (DESIGN.md §8).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub enum ReadCacheMode {
    /// Every read copies from PM (DAX, NOVA).
    #[default]
    Off,
    /// RCache: hot pages from DRAM, copied there by a background thread.
    Rcache,
    /// RCache on PM, off on DRAM ([`crate::medium`]; resolved at mount).
    Auto,
}

impl ReadCacheMode {
    /// Every mode with its name (as `mount --read-cache` takes it).
    pub const ALL: &'static [(&'static str, ReadCacheMode)] = &[
        ("off", ReadCacheMode::Off),
        ("rcache", ReadCacheMode::Rcache),
        ("auto", ReadCacheMode::Auto),
    ];

    /// The mode's name.
    pub fn name(self) -> &'static str {
        match self {
            ReadCacheMode::Off => "off",
            ReadCacheMode::Rcache => "rcache",
            ReadCacheMode::Auto => "auto",
        }
    }
}

/// What a mount's memory is, as the `auto` modes see it ([`crate::medium`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum Medium {
    /// Reads and writes cost what DRAM's do: an image file (tmpfs, page cache), or a
    /// DAX device measured no slower than DRAM.
    Dram,
    /// Slower than DRAM: a PM latency profile, or a DAX device measured slower.
    Pm,
}

impl Medium {
    /// Every medium with its name (as `mount --medium` takes it).
    pub const ALL: &'static [(&'static str, Medium)] =
        &[("dram", Medium::Dram), ("pm", Medium::Pm)];

    /// The medium's name.
    pub fn name(self) -> &'static str {
        match self {
            Medium::Dram => "dram",
            Medium::Pm => "pm",
        }
    }
}

/// Where a volume of several devices places new blocks (MBS-LVM, DESIGN.md §6;
/// one device: the same for every mode).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub enum PlacementMode {
    /// On a device of the writing thread's NUMA node until it is full, then on the
    /// nearest device with room (MBS-LVM's monitor and space manager).
    #[default]
    Local,
    /// Round robin over the devices, one allocation each.
    Interleave,
    /// The first device until it is full, then the next (the paper's baseline:
    /// one volume with no NUMA awareness).
    Single,
}

impl PlacementMode {
    /// Every mode with its name (as `mount --placement` takes it).
    pub const ALL: &'static [(&'static str, PlacementMode)] = &[
        ("local", PlacementMode::Local),
        ("interleave", PlacementMode::Interleave),
        ("single", PlacementMode::Single),
    ];

    /// The mode's name.
    pub fn name(self) -> &'static str {
        match self {
            PlacementMode::Local => "local",
            PlacementMode::Interleave => "interleave",
            PlacementMode::Single => "single",
        }
    }
}

/// Default DRAM budget of the read cache (`--read-cache-size`): 256 MiB.
pub const DEFAULT_READ_CACHE_BYTES: u64 = 256 << 20;
/// Default reads of a page within one window that make it hot.
pub const DEFAULT_READ_CACHE_THRESHOLD: u32 = 2;
/// Default hotness window (ms).
pub const DEFAULT_READ_CACHE_WINDOW_MS: u64 = 100;

/// Default LAWN slot size in bytes (`mkfs --slot-size`).
pub const DEFAULT_SLOT_SIZE: u32 = 64;
/// Default percent of the image for the LAWN zone (`mkfs --zone-percent`).
pub const DEFAULT_ZONE_PERCENT: u32 = 3;

/// Options of `mkfs`.
#[derive(Clone, Debug)]
pub struct MkfsOptions {
    /// Size of the image in bytes (file images are created or resized to it).
    pub size: u64,
    /// Number of per-CPU allocators, inode tables and journals (0 = number of CPUs).
    pub cpus: u32,
    /// Number of inodes (0 = one per 16 KiB of image, at least 1024).
    pub inodes: u64,
    /// Overwrite an existing mnemofs.
    pub force: bool,
    /// Percent of the image for the LAWN zone (slots plus descriptors; 0 = none).
    pub zone_percent: u32,
    /// LAWN slot size in bytes (a multiple of 64 dividing 4096, at most 2048).
    pub slot_size: u32,
    /// The file-system label (at most 255 bytes, no NUL; empty: none).
    pub label: Vec<u8>,
}

impl Default for MkfsOptions {
    fn default() -> Self {
        MkfsOptions {
            size: 1 << 30,
            cpus: 0,
            inodes: 0,
            force: false,
            zone_percent: DEFAULT_ZONE_PERCENT,
            slot_size: DEFAULT_SLOT_SIZE,
            label: Vec::new(),
        }
    }
}

/// A named configuration of modes (DESIGN.md §8). Only presets whose modes exist
/// are accepted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Preset {
    /// The preset's name (`mount --preset`).
    pub name: &'static str,
    /// Its lock mode.
    pub lock: LockMode,
    /// Its small-write mode.
    pub small_write: SmallWriteMode,
    /// Its read cache.
    pub read_cache: ReadCacheMode,
    /// Its placement over the devices of a volume.
    pub placement: PlacementMode,
}

/// Presets that exist in this build.
pub const PRESETS: &[Preset] = &[
    Preset {
        name: "nova",
        lock: LockMode::Inode,
        small_write: SmallWriteMode::Cow,
        read_cache: ReadCacheMode::Off,
        placement: PlacementMode::Single,
    },
    Preset {
        name: "pnova-interval",
        lock: LockMode::Interval,
        small_write: SmallWriteMode::Cow,
        read_cache: ReadCacheMode::Off,
        placement: PlacementMode::Single,
    },
    Preset {
        name: "pnova",
        lock: LockMode::Segment,
        small_write: SmallWriteMode::Cow,
        read_cache: ReadCacheMode::Off,
        placement: PlacementMode::Single,
    },
    Preset {
        name: "finelog",
        lock: LockMode::Segment,
        small_write: SmallWriteMode::Finelog,
        read_cache: ReadCacheMode::Off,
        placement: PlacementMode::Single,
    },
    Preset {
        name: "lawn",
        lock: LockMode::Segment,
        small_write: SmallWriteMode::Lawn,
        read_cache: ReadCacheMode::Off,
        placement: PlacementMode::Single,
    },
    Preset {
        name: "rcache",
        lock: LockMode::Segment,
        small_write: SmallWriteMode::Cow,
        read_cache: ReadCacheMode::Rcache,
        placement: PlacementMode::Single,
    },
    // The techniques' presets place as the paper's baseline does (`single`); only
    // `full` adds MBS-LVM's local placement (one device: no difference).
    // `full` takes LAWN and the read cache where they pay: on PM, not over DRAM
    // (`auto`, see `medium`).
    Preset {
        name: "full",
        lock: LockMode::Segment,
        small_write: SmallWriteMode::Auto,
        read_cache: ReadCacheMode::Auto,
        placement: PlacementMode::Local,
    },
];

/// The preset `mount` and `bench` use unless told otherwise: the best configuration
/// built (every technique).
pub const DEFAULT_PRESET: &str = "full";

/// Default segment size of the `segment` lock mode.
pub const DEFAULT_SEGMENT_SIZE: u64 = 4096;

/// Options of `mount`.
#[derive(Clone, Debug, Default)]
pub struct MountOptions {
    /// Which per-file lock protects file data.
    pub lock: LockMode,
    /// How sub-page writes reach PM.
    pub small_write: SmallWriteMode,
    /// Take an exclusive lock on the image so that a second mount fails (default on
    /// for the CLI; tests that reopen an abandoned image in-process turn it off).
    pub exclusive: bool,
    /// PM latency profile the region charges (`dram`: none; see `pm::PmProfile`).
    pub pm_profile: pm::PmProfile,
    /// Segment size of the `segment` lock mode (a power of two ≥ 4096; 0 = default).
    pub segment_size: u64,
    /// Run LAWN's background write-back thread (off: zone slices stay until a page
    /// CoW, `Fs::lawn_writeback` or a full zone; the crash explorer's traces must be
    /// deterministic).
    pub lawn_writeback_thread: bool,
    /// Keep the LAWN zone at its mkfs size. Off (the default), the zone grows by
    /// chunks of free space when a sub-zone runs low and gives them back
    /// (docs/FORMAT.md §2.9, "Growth"; done by the write-back thread, or
    /// [`crate::Fs::lawn_resize`]).
    pub lawn_fixed_zone: bool,
    /// How LAWN descriptors are stored (`pm::Store16`); `None`: whichever way
    /// `pm::Pm::calibrate_store16` measures cheaper at mount (tests and the crash
    /// explorer name one, for exact counters and deterministic traces).
    pub lawn_desc_store: Option<pm::Store16>,
    /// When reads update atime (default `relatime`). Access times reach PM lazily:
    /// with the file's next attribute entry or at unmount (a crash loses at most the
    /// access-time updates since then).
    pub atime: AtimeMode,
    /// The DRAM read cache (RCache) or none.
    pub read_cache: ReadCacheMode,
    /// The read cache's DRAM budget in bytes (0 = [`DEFAULT_READ_CACHE_BYTES`]).
    pub read_cache_bytes: u64,
    /// Reads of a page within one window that make it hot (0 = default).
    pub read_cache_threshold: u32,
    /// The hotness window in ms (0 = default).
    pub read_cache_window_ms: u64,
    /// Where new blocks go on a volume of several devices.
    pub placement: PlacementMode,
    /// NUMA nodes, their CPUs and distances (`None`: this machine's, from
    /// `/sys/devices/system/node`; given, a one-node machine emulates several).
    pub topology: Option<pm::Topology>,
    /// The medium the `auto` modes go by (`None`: told at mount, see
    /// [`crate::medium`]).
    pub medium: Option<Medium>,
}

impl MountOptions {
    /// The options of preset `p`, with the CLI's defaults for the rest (exclusive,
    /// no PM latency, default segment size, write-back thread on, descriptor store
    /// chosen at mount).
    pub fn from_preset(p: &Preset) -> MountOptions {
        MountOptions {
            lock: p.lock,
            small_write: p.small_write,
            exclusive: true,
            pm_profile: pm::PmProfile::DRAM,
            segment_size: DEFAULT_SEGMENT_SIZE,
            lawn_writeback_thread: true,
            lawn_fixed_zone: false,
            lawn_desc_store: None,
            atime: AtimeMode::Relatime,
            read_cache: p.read_cache,
            read_cache_bytes: DEFAULT_READ_CACHE_BYTES,
            read_cache_threshold: DEFAULT_READ_CACHE_THRESHOLD,
            read_cache_window_ms: DEFAULT_READ_CACHE_WINDOW_MS,
            placement: p.placement,
            topology: None,
            medium: None,
        }
    }
}

/// One device of a mounted volume, and its space.
#[derive(Clone, Debug, Serialize)]
pub struct DeviceStats {
    /// Index in the volume.
    pub index: u32,
    /// Where it was opened.
    pub path: String,
    /// NUMA node (`None`: unknown, counted as node 0 by placement).
    pub node: Option<u32>,
    /// First global block.
    pub start: u64,
    /// Blocks in the global space.
    pub blocks: u64,
    /// Of those, blocks of the data area.
    pub data_blocks: u64,
    /// Free data blocks.
    pub free_blocks: u64,
    /// Inode slots on the device (device 0: the metadata area's table).
    pub inodes: u64,
    /// Of those, free.
    pub inodes_free: u64,
}

/// Geometry, space and counters of a mounted file system.
#[derive(Clone, Debug, Serialize)]
pub struct FsStats {
    /// Bytes of the image in use (`total_blocks * block_size`).
    pub size_bytes: u64,
    /// Block size in bytes.
    pub block_size: u32,
    /// Blocks of the image.
    pub total_blocks: u64,
    /// Blocks of the data area.
    pub data_blocks: u64,
    /// Free data blocks (in the allocator).
    pub free_blocks: u64,
    /// Free blocks kept as files' spares (`statfs` counts them free; a file's next
    /// one-page overwrite takes its spare instead of the allocator's).
    #[serde(default)]
    pub spare_blocks: u64,
    /// Free blocks per CPU allocator.
    pub free_blocks_per_cpu: Vec<u64>,
    /// The volume's devices, in index order, with their space.
    pub devices: Vec<DeviceStats>,
    /// Where new blocks go (`PlacementMode::name`).
    pub placement: String,
    /// CPUs of the geometry.
    pub cpus: u32,
    /// Inode slots.
    pub inodes_total: u64,
    /// Inode slots in use.
    pub inodes_used: u64,
    /// Log pages of the inodes loaded in DRAM.
    pub log_pages: u64,
    /// Data pages of the inodes loaded in DRAM.
    pub data_pages: u64,
    /// Bytes written to PM since the image was mapped (PM counters).
    pub pm_bytes_written: u64,
    /// Cache-line flushes since the image was mapped (PM counters).
    pub pm_flushes: u64,
    /// Fences since the image was mapped (PM counters).
    pub pm_fences: u64,
    /// The flush instruction in use (`pm::FlushKind::name`).
    pub flush_instruction: String,
    /// The host's choices this mount runs by, detected or forced
    /// (`pm::HostChoices::summary`).
    #[serde(default)]
    pub host: String,
    /// How the image is mapped (`pm::MapMode`).
    pub map_mode: String,
    /// Page size mapping the image, measured (`pm::MapPages::name`: `2M`, `4K`,
    /// `unknown`).
    pub map_pages: String,
    /// Bytes of the image mapped by 2 MiB (PMD) entries.
    pub map_pmd_bytes: u64,
    /// Bytes of the image resident in this process's mapping.
    pub map_resident_bytes: u64,
    /// `pm::MapReport` in words, e.g. `2 MiB pages (60 of 64 MiB resident PMD-mapped)`.
    pub map_summary: String,
    /// The lock mode's name.
    pub lock_mode: String,
    /// The small-write mode's name.
    pub small_write_mode: String,
    /// Whether the mount found the image cleanly unmounted.
    pub clean_mount: bool,
    /// The most data writes that were inside the engine at the same time.
    pub max_concurrent_writers: u64,
    /// Contention counters of the process serving this file system, since it
    /// started (`contention` module).
    pub contention: crate::contention::Contention,
    /// LAWN zone slot size in bytes.
    pub lawn_slot_size: u32,
    /// How LAWN descriptors are stored on this mount (`pm::Store16::name`).
    pub lawn_desc_store: String,
    /// LAWN zone slots in use.
    pub lawn_slots_used: u64,
    /// LAWN zone slots free.
    pub lawn_slots_free: u64,
    /// Blocks the LAWN zone's growth chunks hold now (reclaimable: counted free by
    /// `statfs`).
    pub lawn_chunk_blocks: u64,
    /// Chunks the LAWN zone grew by, and gave back, since mount.
    pub lawn_chunks_grown: u64,
    /// (See `lawn_chunks_grown`.)
    pub lawn_chunks_shrunk: u64,
    /// Small writes LAWN put in a zone slot.
    pub lawn_zone_writes: u64,
    /// Small writes LAWN made in place, in the file's page.
    pub lawn_file_writes: u64,
    /// LAWN runs written back to their pages.
    pub lawn_writebacks: u64,
    /// Small writes through the fine-log redo area.
    pub finelog_writes: u64,
    /// Small writes that fell back to page CoW.
    pub small_write_fallbacks: u64,
    /// The medium the mount found, and how (`medium::MediumChoice`).
    pub medium: String,
    /// Read-only now (a `ro` mount or a remount; `Fs::remount`).
    pub read_only: bool,
    /// The file-system label (empty: none).
    pub label: String,
    /// When reads update atime now (`relatime`, `noatime`, `strictatime`).
    pub atime: String,
    /// The read cache's mode (`off`, `rcache`: what `auto` became).
    pub read_cache_mode: String,
    /// Its DRAM budget in bytes (0 without one).
    pub read_cache_bytes: u64,
    /// Pages it holds (`Ready`).
    pub read_cache_pages: u64,
    /// Page reads it served from DRAM.
    pub read_cache_hits: u64,
    /// Page reads that went to PM with the cache on.
    pub read_cache_misses: u64,
    /// Hot pages claimed for copying.
    pub read_cache_inserts: u64,
    /// Pages the copier brought into DRAM.
    pub read_cache_copies: u64,
    /// Cached pages given up for others (CLOCK).
    pub read_cache_evictions: u64,
    /// Cached copies dropped because a write or a free changed their block.
    pub read_cache_invalidations: u64,
    /// Hot pages not queued because the copier's queue was full.
    pub read_cache_dropped: u64,
}
