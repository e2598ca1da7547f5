//! IPv4 CIDR blocks: parsed, checked canonical, and cut into the /24s the
//! subnets get.

use core::fmt;

/// An IPv4 network: address and prefix length, host bits zero.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Ipv4Net {
    addr: u32,
    prefix: u8,
}

/// The prefix length of subnets.
pub const SUBNET_PREFIX: u8 = 24;

impl Ipv4Net {
    /// Parses `a.b.c.d/n`. Host bits must be zero: EC2 reports blocks in
    /// canonical form, and a block compared with what EC2 reports must match.
    pub fn parse(text: &str) -> Result<Self, &'static str> {
        let (addr, prefix) = text
            .split_once('/')
            .ok_or("must be an IPv4 CIDR block such as 10.0.0.0/16")?;
        let prefix: u8 = prefix
            .parse()
            .ok()
            .filter(|p| *p <= 32 && !prefix.starts_with('+'))
            .ok_or("must have a prefix length of 0 to 32")?;
        let mut octets = addr.split('.');
        let mut value: u32 = 0;
        for _ in 0..4 {
            let octet: u8 = octets
                .next()
                .filter(|o| !o.is_empty() && o.len() <= 3 && o.bytes().all(|b| b.is_ascii_digit()))
                .and_then(|o| o.parse().ok())
                .ok_or("must be an IPv4 CIDR block such as 10.0.0.0/16")?;
            value = (value << 8) | u32::from(octet);
        }
        if octets.next().is_some() {
            return Err("must be an IPv4 CIDR block such as 10.0.0.0/16");
        }
        let net = Self {
            addr: value,
            prefix,
        };
        if value & !net.mask() != 0 {
            return Err("has host bits set; write the network address (such as 10.0.0.0/16)");
        }
        Ok(net)
    }

    pub fn prefix(self) -> u8 {
        self.prefix
    }

    fn mask(self) -> u32 {
        u32::MAX
            .checked_shl(32 - u32::from(self.prefix))
            .unwrap_or(0)
    }

    /// How many /24s the block holds (0 if it is smaller than a /24).
    pub fn subnet_count(self) -> u32 {
        match SUBNET_PREFIX.checked_sub(self.prefix) {
            Some(bits) => 1u32.checked_shl(u32::from(bits)).unwrap_or(u32::MAX),
            None => 0,
        }
    }

    /// The `index`-th /24 of the block, if it has that many.
    pub fn subnet(self, index: u32) -> Option<Self> {
        (index < self.subnet_count()).then(|| Self {
            addr: self.addr | (index << (32 - u32::from(SUBNET_PREFIX))),
            prefix: SUBNET_PREFIX,
        })
    }
}

impl fmt::Display for Ipv4Net {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let [o1, o2, o3, o4] = self.addr.to_be_bytes();
        write!(f, "{o1}.{o2}.{o3}.{o4}/{}", self.prefix)
    }
}

#[cfg(test)]
mod tests {
    use capwasm_provider_sdk::prelude::*;

    use super::*;

    fn net(text: &str) -> Ipv4Net {
        Ipv4Net::parse(text).expect(text)
    }

    #[test]
    fn parse_round_trips_canonical_blocks() {
        for text in [
            "10.0.0.0/16",
            "0.0.0.0/0",
            "203.0.113.7/32",
            "172.16.8.0/21",
        ] {
            assert_eq!(net(text).to_string(), text);
        }
    }

    #[test]
    fn parse_refuses_malformed_and_non_canonical_blocks() {
        for text in [
            "10.0.0.0",
            "10.0.0/16",
            "10.0.0.0.0/16",
            "10.0.0.256/32",
            "10.0.0.0/33",
            "10.0.0.0/+8",
            "10.0.0.0/",
            "10.0.0.1/16",
            "a.b.c.d/8",
            " 10.0.0.0/8",
            "0010.0.0.0/8",
            "fd00::/8",
        ] {
            assert!(Ipv4Net::parse(text).is_err(), "{text}");
        }
    }

    #[test]
    fn subnets_are_the_blocks_24s_in_order() {
        let vpc = net("10.0.0.0/16");
        assert_eq!(vpc.subnet_count(), 256);
        assert_eq!(vpc.subnet(0), Some(net("10.0.0.0/24")));
        assert_eq!(vpc.subnet(5), Some(net("10.0.5.0/24")));
        assert_eq!(vpc.subnet(255), Some(net("10.0.255.0/24")));
        assert_eq!(vpc.subnet(256), None);

        let small = net("172.16.8.0/21");
        assert_eq!(small.subnet_count(), 8);
        assert_eq!(small.subnet(7), Some(net("172.16.15.0/24")));
        assert_eq!(small.subnet(8), None);
        assert_eq!(net("10.0.0.0/25").subnet(0), None);
        assert_eq!(net("0.0.0.0/0").subnet_count(), 1 << 24);
    }
}
