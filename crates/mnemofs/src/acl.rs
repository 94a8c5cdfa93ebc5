//! POSIX ACLs as Linux stores them in the `system.posix_acl_access` and
//! `system.posix_acl_default` extended attributes: decoding and validation, and the
//! three rules that tie an ACL to the file mode (what `fs/posix_acl.c` calls
//! `posix_acl_equiv_mode`, `posix_acl_chmod` and `posix_acl_create`).
//!
//! With the FUSE mount the kernel enforces ACLs itself (`FUSE_POSIX_ACL`); the file
//! system stores them, keeps the mode in step with the access ACL, rewrites the
//! access ACL on chmod, and gives new nodes their parent's default ACL.

use crate::error::{FsError, Result};

/// Name of the access ACL attribute.
pub const ACL_ACCESS: &[u8] = b"system.posix_acl_access";
/// Name of the default ACL attribute (directories only).
pub const ACL_DEFAULT: &[u8] = b"system.posix_acl_default";

/// `a_version` of the xattr form.
const VERSION: u32 = 2;
const USER_OBJ: u16 = 0x01;
const USER: u16 = 0x02;
const GROUP_OBJ: u16 = 0x04;
const GROUP: u16 = 0x08;
const MASK: u16 = 0x10;
const OTHER: u16 = 0x20;
/// `e_id` of the entries that name no user or group.
const UNDEFINED_ID: u32 = u32::MAX;
/// Most entries an ACL may have (ext4's limit for an ACL in one block is lower;
/// the 64 KiB attribute budget of an inode bounds it anyway).
const MAX_ENTRIES: usize = 8190;

/// One entry: tag, permission bits (rwx), user or group id.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AclEntry {
    /// `ACL_USER_OBJ`, `ACL_USER`, `ACL_GROUP_OBJ`, `ACL_GROUP`, `ACL_MASK`, `ACL_OTHER`.
    pub tag: u16,
    /// Read (4), write (2), execute (1).
    pub perm: u16,
    /// The user or group of an `ACL_USER`/`ACL_GROUP` entry.
    pub id: u32,
}

/// A decoded, valid ACL (entries in the canonical order Linux requires).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Acl(pub Vec<AclEntry>);

/// A setxattr flag of the engine (outside `XATTR_CREATE | XATTR_REPLACE`): with an
/// access ACL, also clear set-group-ID, because the caller is neither in the file's
/// group nor has CAP_FSETID (what the kernel's `FUSE_SETXATTR_ACL_KILL_SGID` says;
/// Linux's `posix_acl_update_mode`).
pub const XATTR_ACL_KILL_SGID: i32 = 0x100;

fn bad() -> FsError {
    FsError::Invalid("POSIX ACL")
}

/// Whether `name` is one of the two ACL attribute names.
pub fn is_acl_name(name: &[u8]) -> bool {
    name == ACL_ACCESS || name == ACL_DEFAULT
}

impl Acl {
    /// Decodes and validates the xattr form (EINVAL, as Linux, for a wrong version,
    /// a size that is not header + whole entries, an unknown tag or permission
    /// bit, entries out of order, a missing owner/group/other entry, or named
    /// entries without a mask). `None` for a header with no entries: Linux reads
    /// that as "no ACL".
    pub fn decode(v: &[u8]) -> Result<Option<Acl>> {
        let (head, body) = v.split_first_chunk::<4>().ok_or_else(bad)?;
        if u32::from_le_bytes(*head) != VERSION || body.len() % 8 != 0 {
            return Err(bad());
        }
        if body.is_empty() {
            return Ok(None);
        }
        let mut entries = Vec::with_capacity(body.len() / 8);
        for c in body.chunks_exact(8) {
            let tag = u16::from_le_bytes([c[0], c[1]]);
            let perm = u16::from_le_bytes([c[2], c[3]]);
            let id = u32::from_le_bytes([c[4], c[5], c[6], c[7]]);
            entries.push(AclEntry { tag, perm, id });
        }
        if entries.len() > MAX_ENTRIES {
            return Err(bad());
        }
        let acl = Acl(entries);
        acl.check()?;
        Ok(Some(acl))
    }

    /// Linux's `posix_acl_valid`: tags in ascending order, named users and groups
    /// by ascending id with no repeats, one each of owner, group and other, a mask
    /// when there are named entries.
    fn check(&self) -> Result<()> {
        let (mut named, mut mask, mut uo, mut go, mut oth) = (false, false, 0, 0, 0);
        let mut prev: Option<(u16, u32)> = None;
        for e in &self.0 {
            if e.perm & !7 != 0 {
                return Err(bad());
            }
            let key = match e.tag {
                USER_OBJ | GROUP_OBJ | MASK | OTHER => (e.tag, 0),
                USER | GROUP => (e.tag, e.id),
                _ => return Err(bad()),
            };
            if prev.is_some_and(|p| p >= key) {
                return Err(bad());
            }
            prev = Some(key);
            match e.tag {
                USER_OBJ => uo += 1,
                GROUP_OBJ => go += 1,
                OTHER => oth += 1,
                MASK => mask = true,
                _ => named = true,
            }
        }
        if uo != 1 || go != 1 || oth != 1 || (named && !mask) {
            return Err(bad());
        }
        Ok(())
    }

    /// The xattr form.
    pub fn encode(&self) -> Vec<u8> {
        let mut v = Vec::with_capacity(4 + 8 * self.0.len());
        v.extend_from_slice(&VERSION.to_le_bytes());
        for e in &self.0 {
            let id = match e.tag {
                USER | GROUP => e.id,
                _ => UNDEFINED_ID,
            };
            v.extend_from_slice(&e.tag.to_le_bytes());
            v.extend_from_slice(&e.perm.to_le_bytes());
            v.extend_from_slice(&id.to_le_bytes());
        }
        v
    }

    /// The permission bits (0o777) this access ACL gives the file, and whether the
    /// ACL says more than they do (named entries or a mask): `posix_acl_equiv_mode`.
    pub fn mode(&self) -> (u32, bool) {
        let (mut mode, mut extended) = (0u32, false);
        for e in &self.0 {
            let p = u32::from(e.perm & 7);
            match e.tag {
                USER_OBJ => mode |= p << 6,
                GROUP_OBJ => mode |= p << 3,
                OTHER => mode |= p,
                MASK => {
                    // After GROUP_OBJ in the canonical order: the mask is what the
                    // group bits show.
                    mode = (mode & !0o070) | (p << 3);
                    extended = true;
                }
                _ => extended = true,
            }
        }
        (mode, extended)
    }

    /// The access ACL after a chmod to `mode`: owner and other take the new bits,
    /// and so does the mask (the owning group when there is no mask).
    pub fn chmod(&mut self, mode: u32) {
        let has_mask = self.0.iter().any(|e| e.tag == MASK);
        for e in &mut self.0 {
            match e.tag {
                USER_OBJ => e.perm = ((mode >> 6) & 7) as u16,
                OTHER => e.perm = (mode & 7) as u16,
                MASK => e.perm = ((mode >> 3) & 7) as u16,
                GROUP_OBJ if !has_mask => e.perm = ((mode >> 3) & 7) as u16,
                _ => {}
            }
        }
    }

    /// A new node's access ACL from its parent's default ACL (`self`) and the mode
    /// it was created with (`posix_acl_create_masq`): each of owner, mask (or owning
    /// group) and other keeps only the bits both allow, and so does the mode.
    /// Returns the ACL and the new mode; the ACL is `None` when the mode says it all.
    pub fn create_masq(&self, mode: u32) -> (Option<Acl>, u32) {
        let mut acl = self.clone();
        let mut mode = mode;
        let mut extended = false;
        let has_mask = acl.0.iter().any(|e| e.tag == MASK);
        for e in &mut acl.0 {
            match e.tag {
                USER_OBJ => {
                    e.perm &= ((mode >> 6) & 7) as u16;
                    mode &= (u32::from(e.perm) << 6) | !0o700;
                }
                OTHER => {
                    e.perm &= (mode & 7) as u16;
                    mode &= u32::from(e.perm) | !0o007;
                }
                MASK => extended = true,
                USER | GROUP => extended = true,
                _ => {}
            }
        }
        for e in &mut acl.0 {
            if e.tag == MASK || (e.tag == GROUP_OBJ && !has_mask) {
                e.perm &= ((mode >> 3) & 7) as u16;
                mode &= (u32::from(e.perm) << 3) | !0o070;
            }
        }
        (extended.then_some(acl), mode)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn e(tag: u16, perm: u16, id: u32) -> AclEntry {
        AclEntry { tag, perm, id }
    }

    fn minimal(mode: u32) -> Acl {
        Acl(vec![
            e(USER_OBJ, ((mode >> 6) & 7) as u16, UNDEFINED_ID),
            e(GROUP_OBJ, ((mode >> 3) & 7) as u16, UNDEFINED_ID),
            e(OTHER, (mode & 7) as u16, UNDEFINED_ID),
        ])
    }

    fn extended() -> Acl {
        Acl(vec![
            e(USER_OBJ, 7, UNDEFINED_ID),
            e(USER, 6, 1000),
            e(GROUP_OBJ, 5, UNDEFINED_ID),
            e(GROUP, 4, 100),
            e(MASK, 6, UNDEFINED_ID),
            e(OTHER, 0, UNDEFINED_ID),
        ])
    }

    #[test]
    fn round_trip_and_mode() {
        let a = extended();
        let v = a.encode();
        assert_eq!(v.len(), 4 + 6 * 8);
        assert_eq!(Acl::decode(&v).unwrap(), Some(a.clone()));
        // Group bits show the mask, not the owning group.
        assert_eq!(a.mode(), (0o760, true));
        assert_eq!(minimal(0o640).mode(), (0o640, false));
        assert_eq!(Acl::decode(&VERSION.to_le_bytes()).unwrap(), None);
    }

    #[test]
    fn invalid_forms_are_refused() {
        let good = extended().encode();
        let cases: Vec<Vec<u8>> = vec![
            vec![],
            vec![2, 0, 0],
            {
                let mut v = good.clone();
                v[0] = 1; // version
                v
            },
            good[..good.len() - 1].to_vec(),
            {
                // Named user without a mask.
                let mut a = extended();
                a.0.retain(|x| x.tag != MASK);
                a.encode()
            },
            {
                // Out of order.
                let mut a = extended();
                a.0.swap(0, 1);
                a.encode()
            },
            {
                // A permission bit past rwx.
                let mut a = extended();
                a.0[0].perm = 8;
                a.encode()
            },
            {
                // Two entries for one named user.
                let mut a = extended();
                a.0.insert(1, e(USER, 4, 1000));
                a.encode()
            },
            {
                // No OTHER entry.
                let mut a = extended();
                a.0.pop();
                a.encode()
            },
        ];
        for (i, c) in cases.iter().enumerate() {
            assert!(Acl::decode(c).is_err(), "case {i} accepted");
        }
    }

    #[test]
    fn chmod_sets_mask_not_group() {
        let mut a = extended();
        a.chmod(0o751);
        assert_eq!(a.0[0].perm, 7);
        assert_eq!(
            a.0[2].perm, 5,
            "owning group untouched when there is a mask"
        );
        assert_eq!(a.0[4].perm, 5);
        assert_eq!(a.0[5].perm, 1);
        let mut m = minimal(0o644);
        m.chmod(0o750);
        assert_eq!(m, minimal(0o750));
    }

    #[test]
    fn create_masq_as_linux() {
        // Default ACL with a named user and mask rwx; create mode 0666.
        let mut d = extended();
        d.0[4].perm = 7;
        d.0[5].perm = 5;
        let (acl, mode) = d.create_masq(0o666);
        let acl = acl.unwrap();
        assert_eq!(mode, 0o664);
        assert_eq!(acl.0[0].perm, 6);
        assert_eq!(
            acl.0[4].perm, 6,
            "mask limited by the group bits of the mode"
        );
        assert_eq!(acl.0[5].perm, 4);
        // A minimal default ACL yields no access ACL, just the mode.
        let (acl, mode) = minimal(0o750).create_masq(0o777 | libc::S_ISGID);
        assert!(acl.is_none());
        assert_eq!(mode, 0o750 | libc::S_ISGID);
    }
}
