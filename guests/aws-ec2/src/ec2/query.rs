//! EC2 Query API requests: an action and its parameters, sent as an
//! `application/x-www-form-urlencoded` body. Lists are numbered from 1
//! (`InstanceId.1`, `Filter.2.Value.1`), as the Query protocol has it.

use capwasm_provider_sdk::http::encode_component;
use capwasm_provider_sdk::prelude::*;

use super::model::{Rule, Source};

/// The API version every request names.
pub const VERSION: &str = "2016-11-15";

/// One request: action, then parameters in the order added.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Query {
    action: &'static str,
    params: Vec<(String, String)>,
    filters: usize,
    tag_specifications: usize,
}

impl Query {
    pub fn new(action: &'static str) -> Self {
        Self {
            action,
            params: Vec::new(),
            filters: 0,
            tag_specifications: 0,
        }
    }

    pub fn action(&self) -> &'static str {
        self.action
    }

    #[must_use]
    pub fn param(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.params.push((name.into(), value.into()));
        self
    }

    /// `<prefix>.1=<v1>&<prefix>.2=<v2>...`
    #[must_use]
    pub fn list<S: AsRef<str>>(mut self, prefix: &str, values: &[S]) -> Self {
        for (i, value) in values.iter().enumerate() {
            self = self.param(format!("{prefix}.{}", i + 1), value.as_ref());
        }
        self
    }

    /// The next `Filter.N`: resources whose `name` has one of `values`.
    #[must_use]
    pub fn filter<S: AsRef<str>>(mut self, name: &str, values: &[S]) -> Self {
        self.filters += 1;
        let prefix = format!("Filter.{}", self.filters);
        self = self.param(format!("{prefix}.Name"), name);
        self.list(&format!("{prefix}.Value"), values)
    }

    /// Resources carrying tag `key` with value `value`.
    #[must_use]
    pub fn tag_filter(self, key: &str, value: &str) -> Self {
        self.filter(&format!("tag:{key}"), &[value])
    }

    /// The next `TagSpecification.N`: tags the created `resource_type`
    /// gets in the same call, so it never exists untagged.
    #[must_use]
    pub fn tag_specification(mut self, resource_type: &str, tags: &[(String, String)]) -> Self {
        self.tag_specifications += 1;
        let prefix = format!("TagSpecification.{}", self.tag_specifications);
        self = self.param(format!("{prefix}.ResourceType"), resource_type);
        for (i, (key, value)) in tags.iter().enumerate() {
            self = self
                .param(format!("{prefix}.Tag.{}.Key", i + 1), key.as_str())
                .param(format!("{prefix}.Tag.{}.Value", i + 1), value.as_str());
        }
        self
    }

    /// `IpPermissions.N`: one permission per rule.
    #[must_use]
    pub fn ip_permissions(mut self, rules: &[Rule]) -> Self {
        for (i, rule) in rules.iter().enumerate() {
            let prefix = format!("IpPermissions.{}", i + 1);
            self = self.param(format!("{prefix}.IpProtocol"), rule.protocol.as_str());
            if let Some((from, to)) = rule.ports {
                self = self
                    .param(format!("{prefix}.FromPort"), from.to_string())
                    .param(format!("{prefix}.ToPort"), to.to_string());
            }
            let (list, field, value) = match &rule.source {
                Source::Cidr(cidr) => ("IpRanges", "CidrIp", cidr),
                Source::Ipv6Cidr(cidr) => ("Ipv6Ranges", "CidrIpv6", cidr),
                Source::Group(id) => ("Groups", "GroupId", id),
                Source::PrefixList(id) => ("PrefixListIds", "PrefixListId", id),
            };
            self = self.param(format!("{prefix}.{list}.1.{field}"), value.as_str());
        }
        self
    }

    /// The form body: `Action=...&Version=...&<params>`, every name and
    /// value form-encoded.
    pub fn encode(&self) -> String {
        let mut body = format!("Action={}&Version={VERSION}", self.action);
        for (name, value) in &self.params {
            body.push('&');
            body.push_str(&form_component(name));
            body.push('=');
            body.push_str(&form_component(value));
        }
        body
    }
}

/// Percent-encoding with `+` for spaces, as HTML forms and AWS's SDKs
/// encode bodies. A signature covers the body's bytes, and a server that
/// checks it against the form re-encoded (moto does) must get the same.
fn form_component(value: &str) -> String {
    // A `%` of the value is itself encoded, so "%20" only stands for spaces.
    encode_component(value).replace("%20", "+")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encode_numbers_lists_filters_and_tags() {
        let tags = vec![
            ("capwasm.dev/cluster".to_owned(), "default/demo".to_owned()),
            ("Name".to_owned(), "a b".to_owned()),
        ];
        let query = Query::new("DescribeSubnets")
            .filter("vpc-id", &["vpc-1"])
            .tag_filter("capwasm.dev/cluster", "default/demo")
            .list("SubnetId", &["subnet-1", "subnet-2"])
            .tag_specification("subnet", &tags);
        assert_eq!(
            query.encode(),
            "Action=DescribeSubnets&Version=2016-11-15\
             &Filter.1.Name=vpc-id&Filter.1.Value.1=vpc-1\
             &Filter.2.Name=tag%3Acapwasm.dev%2Fcluster&Filter.2.Value.1=default%2Fdemo\
             &SubnetId.1=subnet-1&SubnetId.2=subnet-2\
             &TagSpecification.1.ResourceType=subnet\
             &TagSpecification.1.Tag.1.Key=capwasm.dev%2Fcluster&TagSpecification.1.Tag.1.Value=default%2Fdemo\
             &TagSpecification.1.Tag.2.Key=Name&TagSpecification.1.Tag.2.Value=a+b"
        );
    }

    #[test]
    fn encode_escapes_base64_and_reserved_characters() {
        let query = Query::new("RunInstances")
            .param("UserData", "I2Nsb3Vk+/Q==&x")
            .param("GroupDescription", "a b%20c~");
        assert_eq!(
            query.encode(),
            "Action=RunInstances&Version=2016-11-15&UserData=I2Nsb3Vk%2B%2FQ%3D%3D%26x\
             &GroupDescription=a+b%2520c~"
        );
    }

    #[test]
    fn ip_permissions_encode_one_source_each() {
        let query = Query::new("AuthorizeSecurityGroupIngress")
            .param("GroupId", "sg-1")
            .ip_permissions(&[
                Rule::tcp(6443, Source::Cidr("203.0.113.0/24".to_owned())),
                Rule::all(Source::Group("sg-1".to_owned())),
            ]);
        assert_eq!(
            query.encode(),
            "Action=AuthorizeSecurityGroupIngress&Version=2016-11-15&GroupId=sg-1\
             &IpPermissions.1.IpProtocol=tcp&IpPermissions.1.FromPort=6443&IpPermissions.1.ToPort=6443\
             &IpPermissions.1.IpRanges.1.CidrIp=203.0.113.0%2F24\
             &IpPermissions.2.IpProtocol=-1&IpPermissions.2.Groups.1.GroupId=sg-1"
        );
    }

    #[test]
    fn filter_values_are_numbered_per_filter() {
        let query = Query::new("DescribeInstances")
            .filter("instance-state-name", &["pending", "running"])
            .param("MaxResults", "100");
        assert_eq!(
            query.encode(),
            "Action=DescribeInstances&Version=2016-11-15\
             &Filter.1.Name=instance-state-name&Filter.1.Value.1=pending&Filter.1.Value.2=running\
             &MaxResults=100"
        );
    }
}
