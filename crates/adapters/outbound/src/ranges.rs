//! The addresses the http step may not reach unless private targets are
//! allowed: every range of IANA's IPv4 and IPv6 special-purpose address
//! registries (plus multicast and the deprecated site-local block), in one
//! table per family. Ranges that carry an IPv4 address (IPv4-mapped,
//! IPv4-compatible, NAT64's well-known prefix, 6to4) are judged by that
//! address.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// `(network, prefix length)` of each refused IPv4 range.
const FORBIDDEN_V4: &[(Ipv4Addr, u8)] = &[
    (Ipv4Addr::new(0, 0, 0, 0), 8),       // "this network"
    (Ipv4Addr::new(10, 0, 0, 0), 8),      // private use
    (Ipv4Addr::new(100, 64, 0, 0), 10),   // shared address space (CGN)
    (Ipv4Addr::new(127, 0, 0, 0), 8),     // loopback
    (Ipv4Addr::new(169, 254, 0, 0), 16),  // link local
    (Ipv4Addr::new(172, 16, 0, 0), 12),   // private use
    (Ipv4Addr::new(192, 0, 0, 0), 24),    // IETF protocol assignments
    (Ipv4Addr::new(192, 0, 2, 0), 24),    // documentation (TEST-NET-1)
    (Ipv4Addr::new(192, 31, 196, 0), 24), // AS112-v4
    (Ipv4Addr::new(192, 52, 193, 0), 24), // AMT
    (Ipv4Addr::new(192, 88, 99, 0), 24),  // deprecated 6to4 relay anycast
    (Ipv4Addr::new(192, 168, 0, 0), 16),  // private use
    (Ipv4Addr::new(192, 175, 48, 0), 24), // direct delegation AS112
    (Ipv4Addr::new(198, 18, 0, 0), 15),   // benchmarking
    (Ipv4Addr::new(198, 51, 100, 0), 24), // documentation (TEST-NET-2)
    (Ipv4Addr::new(203, 0, 113, 0), 24),  // documentation (TEST-NET-3)
    (Ipv4Addr::new(224, 0, 0, 0), 4),     // multicast
    (Ipv4Addr::new(240, 0, 0, 0), 4),     // reserved, and the broadcast address
];

/// How an IPv6 range is judged.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum V6 {
    /// Refused.
    Forbidden,
    /// Judged by the IPv4 address in its last 32 bits.
    LastFourBytes,
    /// 6to4: judged by the IPv4 address in bits 16 to 47.
    SixToFour,
}

/// `(network, prefix length, rule)` of each IPv6 range; the longest match wins.
const RANGES_V6: &[(Ipv6Addr, u8, V6)] = &[
    (Ipv6Addr::new(0, 0, 0, 0, 0, 0, 0, 0), 128, V6::Forbidden), // unspecified
    (Ipv6Addr::new(0, 0, 0, 0, 0, 0, 0, 1), 128, V6::Forbidden), // loopback
    (Ipv6Addr::new(0, 0, 0, 0, 0, 0, 0, 0), 96, V6::LastFourBytes), // IPv4-compatible (deprecated)
    (
        Ipv6Addr::new(0, 0, 0, 0, 0, 0xffff, 0, 0),
        96,
        V6::LastFourBytes,
    ), // IPv4-mapped
    (
        Ipv6Addr::new(0x64, 0xff9b, 0, 0, 0, 0, 0, 0),
        96,
        V6::LastFourBytes,
    ), // IPv4/IPv6 translation
    (
        Ipv6Addr::new(0x64, 0xff9b, 1, 0, 0, 0, 0, 0),
        48,
        V6::Forbidden,
    ), // local-use translation
    (Ipv6Addr::new(0x100, 0, 0, 0, 0, 0, 0, 0), 64, V6::Forbidden), // discard-only
    (Ipv6Addr::new(0x100, 0, 0, 1, 0, 0, 0, 0), 64, V6::Forbidden), // dummy prefix
    (
        Ipv6Addr::new(0x2001, 0, 0, 0, 0, 0, 0, 0),
        23,
        V6::Forbidden,
    ), // IETF protocol assignments (Teredo, benchmarking, ORCHID, ...)
    (
        Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 0),
        32,
        V6::Forbidden,
    ), // documentation
    (
        Ipv6Addr::new(0x2002, 0, 0, 0, 0, 0, 0, 0),
        16,
        V6::SixToFour,
    ), // 6to4
    (
        Ipv6Addr::new(0x2620, 0x4f, 0x8000, 0, 0, 0, 0, 0),
        48,
        V6::Forbidden,
    ), // direct delegation AS112
    (
        Ipv6Addr::new(0x3fff, 0, 0, 0, 0, 0, 0, 0),
        20,
        V6::Forbidden,
    ), // documentation
    (
        Ipv6Addr::new(0x5f00, 0, 0, 0, 0, 0, 0, 0),
        16,
        V6::Forbidden,
    ), // segment routing SIDs
    (Ipv6Addr::new(0xfc00, 0, 0, 0, 0, 0, 0, 0), 7, V6::Forbidden), // unique local
    (
        Ipv6Addr::new(0xfe80, 0, 0, 0, 0, 0, 0, 0),
        10,
        V6::Forbidden,
    ), // link local
    (
        Ipv6Addr::new(0xfec0, 0, 0, 0, 0, 0, 0, 0),
        10,
        V6::Forbidden,
    ), // site local (deprecated)
    (Ipv6Addr::new(0xff00, 0, 0, 0, 0, 0, 0, 0), 8, V6::Forbidden), // multicast
];

/// Whether `ip` is an address the http step must not reach by default.
pub fn forbidden(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => forbidden_v4(v4),
        IpAddr::V6(v6) => forbidden_v6(v6),
    }
}

fn forbidden_v4(ip: Ipv4Addr) -> bool {
    let bits = u32::from(ip);
    FORBIDDEN_V4
        .iter()
        .any(|&(network, len)| within(u128::from(bits), u128::from(u32::from(network)), len, 32))
}

fn forbidden_v6(ip: Ipv6Addr) -> bool {
    let bits = u128::from(ip);
    let rule = RANGES_V6
        .iter()
        .filter(|&&(network, len, _)| within(bits, u128::from(network), len, 128))
        .max_by_key(|&&(_, len, _)| len)
        .map(|&(_, _, rule)| rule);
    let embedded = |shift: u32| {
        let [a, b, c, d] = u32::try_from((bits >> shift) & 0xffff_ffff)
            .unwrap_or(0)
            .to_be_bytes();
        forbidden_v4(Ipv4Addr::new(a, b, c, d))
    };
    match rule {
        None => false,
        Some(V6::Forbidden) => true,
        Some(V6::LastFourBytes) => embedded(0),
        Some(V6::SixToFour) => embedded(80),
    }
}

/// Whether the `width`-bit `bits` lie in `network`/`len`.
fn within(bits: u128, network: u128, len: u8, width: u32) -> bool {
    let host_bits = width - u32::from(len);
    let mask = if host_bits >= 128 {
        0
    } else {
        u128::MAX << host_bits
    };
    (bits & mask) == (network & mask)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refused(address: &str) -> bool {
        forbidden(address.parse().expect("an address"))
    }

    #[test]
    fn refuses_every_special_purpose_range_of_both_families() {
        for bad in [
            "127.0.0.1",
            "127.1.2.3",
            "10.0.0.1",
            "172.16.5.4",
            "172.31.255.255",
            "192.168.1.1",
            "169.254.169.254",
            "0.0.0.0",
            "0.1.2.3",
            "100.64.0.1",
            "100.127.255.255",
            "192.0.0.1",
            "192.0.0.170",
            "192.0.2.10",
            "192.31.196.1",
            "192.52.193.1",
            "192.88.99.1",
            "192.175.48.1",
            "198.18.0.1",
            "198.19.255.254",
            "198.51.100.7",
            "203.0.113.9",
            "224.0.0.1",
            "239.255.255.250",
            "240.0.0.1",
            "255.255.255.255",
            "::1",
            "::",
            "fc00::1",
            "fd12:3456::1",
            "fe80::1",
            "fec0::1",
            "ff02::1",
            "::ffff:127.0.0.1",
            "::ffff:10.0.0.1",
            "::ffff:169.254.169.254",
            "::ffff:198.18.0.1",
            "64:ff9b::a9fe:a9fe",
            "64:ff9b:1::8.8.8.8",
            "::127.0.0.1",
            "100::1",
            "100:0:0:1::1",
            "2001::1",
            "2001:0:4136:e378:8000:63bf:3fff:fdd2",
            "2001:2::1",
            "2001:10::1",
            "2001:db8::1",
            "2002:7f00:1::1",
            "2002:c0a8:101::1",
            "2002:a9fe:a9fe::1",
            "2620:4f:8000::1",
            "3fff::1",
            "5f00::1",
        ] {
            assert!(refused(bad), "{bad} must be refused");
        }
    }

    #[test]
    fn lets_public_addresses_through() {
        for good in [
            "93.184.216.34",
            "8.8.8.8",
            "1.1.1.1",
            "100.63.255.255",
            "100.128.0.1",
            "172.32.0.1",
            "192.0.1.1",
            "198.17.255.255",
            "198.20.0.1",
            "2606:4700::1111",
            "2a00:1450:4001::1",
            "::ffff:8.8.8.8",
            "64:ff9b::808:808",
            "2002:808:808::1",
            "2001:200::1",
            "2620:4f:8001::1",
        ] {
            assert!(!refused(good), "{good} must be allowed");
        }
    }

    #[test]
    fn prefixes_match_on_their_length_only() {
        assert!(within(0xc612_0000, 0xc612_0000, 15, 32));
        assert!(within(0xc613_ffff, 0xc612_0000, 15, 32));
        assert!(!within(0xc614_0000, 0xc612_0000, 15, 32));
        assert!(within(u128::MAX, 0, 0, 128));
    }
}
