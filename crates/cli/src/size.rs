//! Byte sizes: parsing `512M`, `4G`, `1GiB`, `1.5T`, `4096`, and printing them.

/// Parses a size. Units are case-insensitive: `K`, `M`, `G`, `T`, `P` and the
/// `KiB`... forms are powers of 1024; `KB`, `MB`, `GB`, `TB`, `PB` are powers of
/// 1000; `B` or no unit is bytes. A fraction is allowed before a unit (`1.5G`).
pub fn parse_size(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let bad = || format!("invalid size '{s}' (examples: 4096, 512M, 4G, 1GiB)");
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let unit = unit.trim();
    if num.is_empty() {
        return Err(bad());
    }
    let mult: u64 = match unit.to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "k" | "kib" => 1 << 10,
        "m" | "mib" => 1 << 20,
        "g" | "gib" => 1 << 30,
        "t" | "tib" => 1 << 40,
        "p" | "pib" => 1 << 50,
        "kb" => 1_000,
        "mb" => 1_000_000,
        "gb" => 1_000_000_000,
        "tb" => 1_000_000_000_000,
        "pb" => 1_000_000_000_000_000,
        _ => return Err(bad()),
    };
    let (int, frac) = match num.split_once('.') {
        Some((i, f)) => (i, f),
        None => (num, ""),
    };
    if frac.contains('.') || (int.is_empty() && frac.is_empty()) {
        return Err(bad());
    }
    if !frac.is_empty() && mult == 1 {
        return Err(format!("invalid size '{s}': a fraction of a byte"));
    }
    let too_big = || format!("size '{s}' is too large");
    let int: u64 = if int.is_empty() {
        0
    } else {
        int.parse().map_err(|_| too_big())?
    };
    let mut total = int.checked_mul(mult).ok_or_else(too_big)?;
    if !frac.is_empty() {
        // frac / 10^len * mult, rounded down, in 128-bit to avoid overflow.
        let digits = frac.len().min(18);
        let f: u128 = frac[..digits].parse().map_err(|_| bad())?;
        let part = f * u128::from(mult) / 10u128.pow(digits as u32);
        total = total
            .checked_add(u64::try_from(part).map_err(|_| too_big())?)
            .ok_or_else(too_big)?;
    }
    Ok(total)
}

/// `parse_size` for clap.
pub fn size_arg(s: &str) -> Result<u64, String> {
    parse_size(s)
}

/// Human-readable size with binary units: `512 B`, `4.0 KiB`, `1.5 GiB`.
pub fn format_bytes(n: u64) -> String {
    const UNITS: [&str; 6] = ["KiB", "MiB", "GiB", "TiB", "PiB", "EiB"];
    if n < 1024 {
        return format!("{n} B");
    }
    let mut v = n as f64 / 1024.0;
    let mut i = 0;
    while v >= 1024.0 && i + 1 < UNITS.len() {
        v /= 1024.0;
        i += 1;
    }
    format!("{v:.1} {}", UNITS[i])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_and_binary() {
        assert_eq!(parse_size("4096"), Ok(4096));
        assert_eq!(parse_size("4096B"), Ok(4096));
        assert_eq!(parse_size("512M"), Ok(512 << 20));
        assert_eq!(parse_size("512m"), Ok(512 << 20));
        assert_eq!(parse_size("4G"), Ok(4 << 30));
        assert_eq!(parse_size("1GiB"), Ok(1 << 30));
        assert_eq!(parse_size("1gib"), Ok(1 << 30));
        assert_eq!(parse_size("64 MiB"), Ok(64 << 20));
        assert_eq!(parse_size(" 2T "), Ok(2 << 40));
        assert_eq!(parse_size("8K"), Ok(8192));
    }

    #[test]
    fn decimal_units_and_fractions() {
        assert_eq!(parse_size("1MB"), Ok(1_000_000));
        assert_eq!(parse_size("2GB"), Ok(2_000_000_000));
        assert_eq!(parse_size("1.5G"), Ok(3 << 29));
        assert_eq!(parse_size("0.5K"), Ok(512));
        assert_eq!(parse_size(".5K"), Ok(512));
    }

    #[test]
    fn rejects() {
        for s in [
            "",
            "M",
            "12X",
            "1.2.3G",
            "-1G",
            "1.5",
            "1.5B",
            "99999999999999999999",
            "16E",
            "4 G B",
        ] {
            assert!(parse_size(s).is_err(), "{s:?} accepted");
        }
        assert!(parse_size("20000000P").unwrap_err().contains("too large"));
    }

    #[test]
    fn formats() {
        assert_eq!(format_bytes(0), "0 B");
        assert_eq!(format_bytes(1023), "1023 B");
        assert_eq!(format_bytes(4096), "4.0 KiB");
        assert_eq!(format_bytes(64 << 20), "64.0 MiB");
        assert_eq!(format_bytes(3 << 29), "1.5 GiB");
        assert_eq!(format_bytes(u64::MAX), "16.0 EiB");
    }
}
