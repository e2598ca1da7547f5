//! EC2's XML answers, read into [`super::model`]. Elements are matched by
//! local name: EC2 puts everything in its versioned namespace, which says
//! nothing the root element's name does not.

use core::str::FromStr;

use capwasm_provider_sdk::prelude::*;
use roxmltree::{Document, Node};

use super::model::{
    Gpu, Image, Instance, InstanceType, Page, Rule, SecurityGroup, Source, Subnet, Vpc,
};

/// An error EC2 answered with.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ApiError {
    pub code: String,
    pub message: String,
}

/// The error in an error answer: EC2's
/// `<Response><Errors><Error><Code>…`, or the `<ErrorResponse><Error>…`
/// shape of AWS's other Query APIs. `None` if `body` holds none.
pub fn error(body: &str) -> Option<ApiError> {
    let document = Document::parse(body).ok()?;
    let error = document.descendants().find(|n| {
        n.is_element() && n.tag_name().name() == "Error" && child(*n, "Code").is_some()
    })?;
    Some(ApiError {
        code: text(error, "Code")?.trim().to_owned(),
        message: child(error, "Message")
            .map(all_text)
            .unwrap_or_default()
            .trim()
            .to_owned(),
    })
}

/// Parses the answer to `action` and reads it with `read`. A body that is
/// not XML, or whose root is not `<{action}Response>`, is an error: a
/// truncated answer or something that is not EC2.
pub fn parse<T>(
    action: &str,
    body: &str,
    read: impl FnOnce(Node<'_, '_>) -> Result<T, String>,
) -> Result<T, String> {
    let document = Document::parse(body).map_err(|err| format!("not XML: {err}"))?;
    let root = document.root_element();
    let name = root.tag_name().name();
    if name.strip_suffix("Response") != Some(action) {
        return Err(format!("<{name}> where <{action}Response> was expected"));
    }
    read(root)
}

/// `DescribeVpcs`.
pub fn vpcs(root: Node<'_, '_>) -> Result<Page<Vpc>, String> {
    page(root, "vpcSet", vpc)
}

/// `CreateVpc`.
pub fn created_vpc(root: Node<'_, '_>) -> Result<Vpc, String> {
    vpc(required_child(root, "vpc")?)
}

fn vpc(item: Node<'_, '_>) -> Result<Vpc, String> {
    Ok(Vpc {
        id: required(item, "vpcId")?,
        cidr: required(item, "cidrBlock")?,
    })
}

/// `DescribeSubnets`.
pub fn subnets(root: Node<'_, '_>) -> Result<Page<Subnet>, String> {
    page(root, "subnetSet", subnet)
}

/// `CreateSubnet`.
pub fn created_subnet(root: Node<'_, '_>) -> Result<Subnet, String> {
    subnet(required_child(root, "subnet")?)
}

fn subnet(item: Node<'_, '_>) -> Result<Subnet, String> {
    Ok(Subnet {
        id: required(item, "subnetId")?,
        zone: required(item, "availabilityZone")?,
        cidr: required(item, "cidrBlock")?,
    })
}

/// `DescribeSecurityGroups`.
pub fn security_groups(root: Node<'_, '_>) -> Result<Page<SecurityGroup>, String> {
    page(root, "securityGroupInfo", |item| {
        let mut ingress = Vec::new();
        for permission in items(item, "ipPermissions") {
            ingress.extend(rules(permission)?);
        }
        Ok(SecurityGroup {
            id: required(item, "groupId")?,
            ingress,
        })
    })
}

/// `CreateSecurityGroup`: the new group's id.
pub fn created_group_id(root: Node<'_, '_>) -> Result<String, String> {
    required(root, "groupId")
}

/// One `ipPermissions` item as rules of one source each.
fn rules(permission: Node<'_, '_>) -> Result<Vec<Rule>, String> {
    let protocol = required(permission, "ipProtocol")?.to_ascii_lowercase();
    let port = |name| -> Result<Option<i32>, String> {
        text(permission, name)
            .map(|p| {
                p.trim()
                    .parse()
                    .map_err(|_| format!("{name} {p:?} is not a number"))
            })
            .transpose()
    };
    let ports = match (port("fromPort")?, port("toPort")?) {
        _ if protocol == super::model::ALL_PROTOCOLS => None,
        (Some(from), Some(to)) => Some((from, to)),
        _ => None,
    };
    let sources = [
        ("ipRanges", "cidrIp", Source::Cidr as fn(String) -> Source),
        ("ipv6Ranges", "cidrIpv6", Source::Ipv6Cidr),
        ("groups", "groupId", Source::Group),
        ("prefixListIds", "prefixListId", Source::PrefixList),
    ];
    let mut rules = Vec::new();
    for (set, field, source) in sources {
        for item in items(permission, set) {
            rules.push(Rule {
                protocol: protocol.clone(),
                ports,
                source: source(required(item, field)?),
            });
        }
    }
    Ok(rules)
}

/// `DescribeInstances`: the instances of every reservation.
pub fn reservations(root: Node<'_, '_>) -> Result<Page<Instance>, String> {
    let mut instances = Vec::new();
    for reservation in items(root, "reservationSet") {
        for item in items(reservation, "instancesSet") {
            instances.push(instance(item)?);
        }
    }
    Ok(Page {
        items: instances,
        next_token: next_token(root),
    })
}

/// `RunInstances`.
pub fn launched(root: Node<'_, '_>) -> Result<Vec<Instance>, String> {
    items(root, "instancesSet").map(instance).collect()
}

fn instance(item: Node<'_, '_>) -> Result<Instance, String> {
    let state = required_child(item, "instanceState")?;
    Ok(Instance {
        id: required(item, "instanceId")?,
        state: required(state, "name")?,
        zone: child(item, "placement").and_then(|p| optional(p, "availabilityZone")),
        private_ip: optional(item, "privateIpAddress"),
        public_ip: optional(item, "ipAddress"),
        private_dns: optional(item, "privateDnsName"),
        public_dns: optional(item, "dnsName"),
        tags: tags(item)?,
    })
}

fn tags(item: Node<'_, '_>) -> Result<Vec<(String, String)>, String> {
    items(item, "tagSet")
        .map(|tag| {
            Ok((
                required(tag, "key")?,
                text(tag, "value").unwrap_or_default().to_owned(),
            ))
        })
        .collect()
}

/// `DescribeImages`.
pub fn images(root: Node<'_, '_>) -> Result<Page<Image>, String> {
    page(root, "imagesSet", |item| {
        Ok(Image {
            id: required(item, "imageId")?,
            state: required(item, "imageState")?,
            architecture: optional(item, "architecture"),
        })
    })
}

/// `DescribeInstanceTypes`.
pub fn instance_types(root: Node<'_, '_>) -> Result<Page<InstanceType>, String> {
    page(root, "instanceTypeSet", |item| {
        let gpus = child(item, "gpuInfo")
            .into_iter()
            .flat_map(|info| items(info, "gpus"))
            .map(|gpu| {
                Ok(Gpu {
                    manufacturer: optional(gpu, "manufacturer").unwrap_or_default(),
                    count: number(gpu, "count")?,
                })
            })
            .collect::<Result<_, String>>()?;
        Ok(InstanceType {
            name: required(item, "instanceType")?,
            default_vcpus: number(required_child(item, "vCpuInfo")?, "defaultVCpus")?,
            memory_mib: number(required_child(item, "memoryInfo")?, "sizeInMiB")?,
            architectures: items(
                required_child(item, "processorInfo")?,
                "supportedArchitectures",
            )
            .filter_map(|n| n.text())
            .map(str::trim)
            .filter(|a| !a.is_empty())
            .map(str::to_owned)
            .collect(),
            gpus,
        })
    })
}

/// Any answer whose content does not matter (deletes, authorizations).
#[allow(
    clippy::unnecessary_wraps,
    reason = "a reader, called where the others are"
)]
pub fn nothing(_: Node<'_, '_>) -> Result<(), String> {
    Ok(())
}

fn page<T>(
    root: Node<'_, '_>,
    set: &str,
    read: impl Fn(Node<'_, '_>) -> Result<T, String>,
) -> Result<Page<T>, String> {
    Ok(Page {
        items: items(root, set).map(read).collect::<Result<_, _>>()?,
        next_token: next_token(root),
    })
}

fn next_token(root: Node<'_, '_>) -> Option<String> {
    optional(root, "nextToken")
}

fn child<'a, 'i>(node: Node<'a, 'i>, name: &str) -> Option<Node<'a, 'i>> {
    node.children()
        .find(|c| c.is_element() && c.tag_name().name() == name)
}

fn required_child<'a, 'i>(node: Node<'a, 'i>, name: &str) -> Result<Node<'a, 'i>, String> {
    child(node, name).ok_or_else(|| format!("<{}> has no <{name}>", node.tag_name().name()))
}

/// The `<item>`s of `node`'s child `set`; none if it has no such child.
fn items<'a, 'i: 'a>(node: Node<'a, 'i>, set: &str) -> impl Iterator<Item = Node<'a, 'i>> {
    child(node, set)
        .into_iter()
        .flat_map(|set| set.children())
        .filter(|c| c.is_element() && c.tag_name().name() == "item")
}

fn text<'a>(node: Node<'a, '_>, name: &str) -> Option<&'a str> {
    child(node, name)?.text()
}

/// A child's text, if it has some that is not blank.
fn optional(node: Node<'_, '_>, name: &str) -> Option<String> {
    text(node, name)
        .map(str::trim)
        .filter(|t| !t.is_empty())
        .map(str::to_owned)
}

fn required(node: Node<'_, '_>, name: &str) -> Result<String, String> {
    optional(node, name).ok_or_else(|| format!("<{}> has no <{name}>", node.tag_name().name()))
}

/// A child's text as a number: missing or not a number is an error.
fn number<T: FromStr>(node: Node<'_, '_>, name: &str) -> Result<T, String> {
    let text = required(node, name)?;
    text.parse()
        .map_err(|_| format!("<{name}> {text:?} is not a number"))
}

fn all_text(node: Node<'_, '_>) -> String {
    node.descendants()
        .filter(Node::is_text)
        .filter_map(|n| n.text())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const NS: &str = r#"xmlns="http://ec2.amazonaws.com/doc/2016-11-15""#;

    #[test]
    fn error_reads_ec2s_error_shape() {
        let body = r#"<?xml version="1.0" encoding="UTF-8"?>
<Response><Errors><Error><Code>InvalidAMIID.NotFound</Code><Message>The image id '[ami-deadbeef]' does not exist</Message></Error></Errors><RequestID>a7c1-4b9e</RequestID></Response>"#;
        assert_eq!(
            error(body),
            Some(ApiError {
                code: "InvalidAMIID.NotFound".to_owned(),
                message: "The image id '[ami-deadbeef]' does not exist".to_owned(),
            })
        );
    }

    #[test]
    fn error_reads_other_query_apis_and_escaped_messages() {
        let body = "<ErrorResponse><Error><Type>Sender</Type><Code>Throttling</Code>\
                    <Message>Rate &amp; burst exceeded</Message></Error></ErrorResponse>";
        let found = error(body).expect("an error");
        assert_eq!(found.code, "Throttling");
        assert_eq!(found.message, "Rate & burst exceeded");
    }

    #[test]
    fn error_is_none_for_bodies_without_one() {
        assert_eq!(error(""), None);
        assert_eq!(error("<html><body>Bad gateway</body></html>"), None);
        assert_eq!(error("<Response><Errors><Error><Code>X</Code>"), None);
    }

    #[test]
    fn parse_refuses_truncated_foreign_and_dtd_bodies() {
        let ok = |root: Node<'_, '_>| Ok(root.tag_name().name().to_owned());
        let full = format!("<DescribeVpcsResponse {NS}><vpcSet/></DescribeVpcsResponse>");
        assert_eq!(
            parse("DescribeVpcs", &full, ok),
            Ok("DescribeVpcsResponse".into())
        );
        let truncated = &full[..full.len() - 5];
        assert!(parse("DescribeVpcs", truncated, ok).is_err_and(|e| e.starts_with("not XML")));
        assert!(
            parse("DescribeVpcs", "<DescribeSubnetsResponse/>", ok)
                .is_err_and(|e| e.contains("<DescribeVpcsResponse>"))
        );
        let bomb = r#"<?xml version="1.0"?><!DOCTYPE r [<!ENTITY a "aaaaaaaa">]><DescribeVpcsResponse>&a;</DescribeVpcsResponse>"#;
        assert!(parse("DescribeVpcs", bomb, ok).is_err());
        assert!(parse("DescribeVpcs", "", ok).is_err());
    }

    #[test]
    fn vpcs_and_subnets_read_ids_blocks_and_zones() {
        let body = format!(
            "<DescribeVpcsResponse {NS}><requestId>r</requestId><vpcSet><item><vpcId>vpc-1</vpcId>\
             <state>available</state><cidrBlock>10.0.0.0/16</cidrBlock>\
             <cidrBlockAssociationSet><item><cidrBlock>10.0.0.0/16</cidrBlock></item></cidrBlockAssociationSet>\
             <tagSet><item><key>capwasm.dev/cluster</key><value>default/demo</value></item></tagSet>\
             </item></vpcSet></DescribeVpcsResponse>"
        );
        let page = parse("DescribeVpcs", &body, vpcs).expect("parses");
        assert_eq!(
            page.items,
            [Vpc {
                id: "vpc-1".into(),
                cidr: "10.0.0.0/16".into()
            }]
        );
        assert_eq!(page.next_token, None);

        let body = format!(
            "<CreateSubnetResponse {NS}><subnet><subnetId>subnet-1</subnetId><vpcId>vpc-1</vpcId>\
             <cidrBlock>10.0.1.0/24</cidrBlock><availabilityZone>us-east-1b</availabilityZone>\
             </subnet></CreateSubnetResponse>"
        );
        let subnet = parse("CreateSubnet", &body, created_subnet).expect("parses");
        assert_eq!(
            (subnet.zone.as_str(), subnet.cidr.as_str()),
            ("us-east-1b", "10.0.1.0/24")
        );
    }

    #[test]
    fn missing_fields_are_errors_not_defaults() {
        let body = format!(
            "<DescribeVpcsResponse {NS}><vpcSet><item><state>available</state></item></vpcSet></DescribeVpcsResponse>"
        );
        assert_eq!(
            parse("DescribeVpcs", &body, vpcs),
            Err("<item> has no <vpcId>".to_owned())
        );
    }

    #[test]
    fn security_groups_flatten_permissions_into_single_source_rules() {
        let body = format!(
            "<DescribeSecurityGroupsResponse {NS}><securityGroupInfo><item><groupId>sg-1</groupId>\
             <ipPermissionsEgress><item><ipProtocol>-1</ipProtocol><ipRanges><item><cidrIp>0.0.0.0/0</cidrIp></item></ipRanges></item></ipPermissionsEgress>\
             <ipPermissions>\
               <item><ipProtocol>tcp</ipProtocol><fromPort>6443</fromPort><toPort>6443</toPort><groups/>\
                 <ipRanges><item><cidrIp>203.0.113.0/24</cidrIp></item><item><cidrIp>198.51.100.0/24</cidrIp></item></ipRanges>\
                 <ipv6Ranges><item><cidrIpv6>2001:db8::/32</cidrIpv6></item></ipv6Ranges><prefixListIds/></item>\
               <item><ipProtocol>-1</ipProtocol><groups><item><userId>1</userId><groupId>sg-1</groupId></item></groups>\
                 <ipRanges/><prefixListIds><item><prefixListId>pl-1</prefixListId></item></prefixListIds></item>\
             </ipPermissions></item></securityGroupInfo></DescribeSecurityGroupsResponse>"
        );
        let page = parse("DescribeSecurityGroups", &body, security_groups).expect("parses");
        let group = &page.items[0];
        assert_eq!(group.id, "sg-1");
        assert_eq!(
            group.ingress,
            [
                Rule::tcp(6443, Source::Cidr("203.0.113.0/24".into())),
                Rule::tcp(6443, Source::Cidr("198.51.100.0/24".into())),
                Rule::tcp(6443, Source::Ipv6Cidr("2001:db8::/32".into())),
                Rule::all(Source::Group("sg-1".into())),
                Rule::all(Source::PrefixList("pl-1".into())),
            ]
        );
    }

    #[test]
    fn reservations_read_instances_tags_addresses_and_the_next_token() {
        let body = format!(
            "<DescribeInstancesResponse {NS}><requestId>r</requestId><reservationSet>\
             <item><reservationId>r-1</reservationId><instancesSet>\
               <item><instanceId>i-1</instanceId><imageId>ami-12c6146b</imageId>\
                 <instanceState><code>16</code><name>running</name></instanceState>\
                 <privateDnsName>ip-10-0-0-4.ec2.internal</privateDnsName><dnsName/>\
                 <placement><availabilityZone>us-east-1a</availabilityZone></placement>\
                 <privateIpAddress>10.0.0.4</privateIpAddress><ipAddress>54.0.0.1</ipAddress>\
                 <networkInterfaceSet><item><privateIpAddress>10.0.0.4</privateIpAddress></item></networkInterfaceSet>\
                 <tagSet><item><key>capwasm.dev/ordinal</key><value>0</value></item><item><key>empty</key><value/></item></tagSet>\
               </item></instancesSet></item>\
             <item><reservationId>r-2</reservationId><instancesSet>\
               <item><instanceId>i-2</instanceId><instanceState><code>0</code><name>pending</name></instanceState></item>\
             </instancesSet></item>\
             </reservationSet><nextToken>token-2</nextToken></DescribeInstancesResponse>"
        );
        let page = parse("DescribeInstances", &body, reservations).expect("parses");
        assert_eq!(page.next_token.as_deref(), Some("token-2"));
        let [first, second] = &page.items[..] else {
            panic!("two instances: {:?}", page.items);
        };
        assert_eq!(
            first,
            &Instance {
                id: "i-1".into(),
                state: "running".into(),
                zone: Some("us-east-1a".into()),
                private_ip: Some("10.0.0.4".into()),
                public_ip: Some("54.0.0.1".into()),
                private_dns: Some("ip-10-0-0-4.ec2.internal".into()),
                public_dns: None,
                tags: vec![
                    ("capwasm.dev/ordinal".into(), "0".into()),
                    ("empty".into(), String::new())
                ],
            }
        );
        assert_eq!(first.tag("capwasm.dev/ordinal"), Some("0"));
        assert_eq!(
            (second.state.as_str(), second.zone.as_deref()),
            ("pending", None)
        );
    }

    #[test]
    fn an_empty_next_token_ends_the_pages() {
        let body = format!(
            "<DescribeInstancesResponse {NS}><reservationSet/><nextToken/></DescribeInstancesResponse>"
        );
        let page = parse("DescribeInstances", &body, reservations).expect("parses");
        assert!(page.items.is_empty());
        assert_eq!(page.next_token, None);
    }

    #[test]
    fn run_instances_and_images_read_their_sets() {
        let body = format!(
            "<RunInstancesResponse {NS}><reservationId>r-1</reservationId><groupSet/><instancesSet><item>\
             <instanceId>i-9</instanceId><instanceState><code>0</code><name>pending</name></instanceState>\
             <clientToken>key-0</clientToken><placement><availabilityZone>us-east-1b</availabilityZone></placement>\
             </item></instancesSet></RunInstancesResponse>"
        );
        let launched = parse("RunInstances", &body, launched).expect("parses");
        assert_eq!(launched[0].id, "i-9");
        assert_eq!(launched[0].zone.as_deref(), Some("us-east-1b"));

        let body = format!(
            "<DescribeImagesResponse {NS}><imagesSet><item><imageId>ami-12c6146b</imageId>\
             <imageState>available</imageState></item></imagesSet></DescribeImagesResponse>"
        );
        let page = parse("DescribeImages", &body, images).expect("parses");
        assert_eq!(page.items[0].state, "available");
        assert_eq!(page.items[0].architecture, None);

        let body = format!(
            "<CreateSecurityGroupResponse {NS}><groupId>sg-7</groupId></CreateSecurityGroupResponse>"
        );
        assert_eq!(
            parse("CreateSecurityGroup", &body, created_group_id),
            Ok("sg-7".into())
        );
    }

    /// Shaped like EC2's answer (abridged): a GPU type whose GPUs have a
    /// `memoryInfo` of their own, and one type of two architectures.
    const INSTANCE_TYPES: &str = "<instanceTypeSet>\
        <item><instanceType>p3.8xlarge</instanceType><currentGeneration>true</currentGeneration>\
          <supportedUsageClasses><item>on-demand</item><item>spot</item></supportedUsageClasses>\
          <processorInfo><supportedArchitectures><item>x86_64</item></supportedArchitectures>\
            <sustainedClockSpeedInGhz>2.7</sustainedClockSpeedInGhz><manufacturer>Intel</manufacturer></processorInfo>\
          <vCpuInfo><defaultVCpus>32</defaultVCpus><defaultCores>16</defaultCores><defaultThreadsPerCore>2</defaultThreadsPerCore>\
            <validCores><item>2</item><item>4</item></validCores></vCpuInfo>\
          <gpuInfo><gpus><item><name>V100</name><manufacturer>NVIDIA</manufacturer><count>4</count>\
            <memoryInfo><sizeInMiB>16384</sizeInMiB></memoryInfo></item></gpus>\
            <totalGpuMemoryInMiB>65536</totalGpuMemoryInMiB></gpuInfo>\
          <memoryInfo><sizeInMiB>249856</sizeInMiB></memoryInfo>\
          <networkInfo><networkCards><item><networkCardIndex>0</networkCardIndex></item></networkCards></networkInfo>\
        </item>\
        <item><instanceType>t2.micro</instanceType>\
          <processorInfo><supportedArchitectures><item>i386</item><item>x86_64</item></supportedArchitectures></processorInfo>\
          <vCpuInfo><defaultVCpus>1</defaultVCpus><defaultCores>1</defaultCores></vCpuInfo>\
          <memoryInfo><sizeInMiB>1024</sizeInMiB></memoryInfo>\
        </item></instanceTypeSet>";

    #[test]
    fn instance_types_read_vcpus_memory_architectures_and_gpus() {
        let body = format!(
            "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\
             <DescribeInstanceTypesResponse {NS}><requestId>r</requestId>{INSTANCE_TYPES}\
             </DescribeInstanceTypesResponse>"
        );
        let page = parse("DescribeInstanceTypes", &body, instance_types).expect("parses");
        assert_eq!(page.next_token, None);
        assert_eq!(
            page.items,
            [
                InstanceType {
                    name: "p3.8xlarge".into(),
                    default_vcpus: 32,
                    memory_mib: 249_856,
                    architectures: vec!["x86_64".into()],
                    gpus: vec![Gpu {
                        manufacturer: "NVIDIA".into(),
                        count: 4
                    }],
                },
                InstanceType {
                    name: "t2.micro".into(),
                    default_vcpus: 1,
                    memory_mib: 1024,
                    architectures: vec!["i386".into(), "x86_64".into()],
                    gpus: Vec::new(),
                },
            ]
        );
        let empty = format!(
            "<DescribeInstanceTypesResponse {NS}><instanceTypeSet/></DescribeInstanceTypesResponse>"
        );
        let page = parse("DescribeInstanceTypes", &empty, instance_types).expect("parses");
        assert!(page.items.is_empty());
    }

    #[test]
    fn instance_types_without_their_figures_are_errors() {
        let read = |item: &str| {
            let body = format!(
                "<DescribeInstanceTypesResponse {NS}><instanceTypeSet><item><instanceType>m5.large</instanceType>\
                 {item}</item></instanceTypeSet></DescribeInstanceTypesResponse>"
            );
            parse("DescribeInstanceTypes", &body, instance_types)
        };
        let processor = "<processorInfo><supportedArchitectures><item>x86_64</item></supportedArchitectures></processorInfo>";
        let vcpus = "<vCpuInfo><defaultVCpus>2</defaultVCpus></vCpuInfo>";
        let memory = "<memoryInfo><sizeInMiB>8192</sizeInMiB></memoryInfo>";
        assert!(read(&format!("{processor}{vcpus}{memory}")).is_ok());
        assert_eq!(
            read(&format!("{processor}{vcpus}")),
            Err("<item> has no <memoryInfo>".to_owned())
        );
        assert_eq!(
            read(&format!(
                "{processor}<vCpuInfo><defaultVCpus>two</defaultVCpus></vCpuInfo>{memory}"
            )),
            Err("<defaultVCpus> \"two\" is not a number".to_owned())
        );
        assert_eq!(
            read(&format!(
                "{processor}{vcpus}{memory}<gpuInfo><gpus><item><manufacturer>NVIDIA</manufacturer></item></gpus></gpuInfo>"
            )),
            Err("<item> has no <count>".to_owned())
        );
    }
}
