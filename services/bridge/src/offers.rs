//! What the wrapped servers offer besides tools, as a client of the
//! gateway sees it: their resources, resource templates and prompts, under
//! the naming rules of tools (a prompt's name, and the `name` of a
//! resource or template, get the `<server>__` prefix when tools do), minus
//! what a server's policy denies; and which server serves a given URI or
//! prompt name.
//!
//! A resource keeps its URI (clients and servers take URIs as they are:
//! `file:///…` means a file, and a URI inside a tool's result must still
//! name the same resource), so a URI is routed by who offers it: the server
//! that lists it, else the one whose template matches it, else the only
//! server that offers resources at all. Two servers offering the same URI
//! make it ambiguous, and a read of it is refused saying so.
//!
//! Built with the catalog ([`crate::current`]) whenever a server's lists
//! change.

use std::sync::Arc;

use code_mode_proto as proto;
use serde_json::Value;

use crate::policy::Admission;
use crate::server::Offering;

/// One resource or prompt as offered, and where it comes from.
#[derive(Debug, Clone)]
struct Item {
    server: usize,
    /// The URI (a resource) or the offered name (a prompt).
    key: String,
    /// The name its server lists (a prompt).
    mcp_name: String,
    definition: Value,
}

/// One resource template as offered.
#[derive(Debug, Clone)]
struct Template {
    server: usize,
    template: UriTemplate,
    definition: Value,
}

/// The offers of every server (see the module doc).
#[derive(Debug, Clone, Default)]
pub(crate) struct Offers {
    resources: Vec<Item>,
    templates: Vec<Template>,
    prompts: Vec<Item>,
    /// Each server's offering as listed (for its flags).
    servers: Vec<Arc<Offering>>,
    /// Each server's names, for messages.
    names: Vec<String>,
    prefixed: bool,
    /// Whether each server's resources and prompts are private.
    private: Vec<bool>,
}

/// A server's policy, as the offers need it: what it says of a resource
/// or a prompt.
pub(crate) trait Judge {
    fn resource(&self, server: usize, uri: &str) -> Option<Admission>;
    fn prompt(&self, server: usize, name: &str) -> Option<Admission>;
}

fn allowed(admission: Option<Admission>) -> bool {
    !matches!(admission, Some(Admission::Deny { .. }))
}

impl Offers {
    /// Build the offers from each server's offering (by server index,
    /// named `names`), prefixing names when `prefixed`, leaving out what
    /// `judge` denies; `private[i]`: server `i`'s resources and prompts are
    /// private.
    pub(crate) fn build(
        servers: Vec<Arc<Offering>>,
        names: Vec<String>,
        prefixed: bool,
        private: Vec<bool>,
        judge: &impl Judge,
    ) -> Self {
        let mut offers = Offers { prefixed, private, ..Offers::default() };
        for (server, offering) in servers.iter().enumerate() {
            for resource in &offering.resources {
                let Some(uri) = resource.get("uri").and_then(Value::as_str) else { continue };
                if !allowed(judge.resource(server, uri)) {
                    continue;
                }
                let definition = offers.renamed(resource, &names[server]);
                offers.resources.push(Item { server, key: uri.to_string(), mcp_name: String::new(), definition });
            }
            for template in &offering.templates {
                let Some(uri) = template.get("uriTemplate").and_then(Value::as_str) else { continue };
                let definition = offers.renamed(template, &names[server]);
                offers.templates.push(Template { server, template: UriTemplate::new(uri), definition });
            }
            for prompt in &offering.prompts {
                let Some(name) = prompt.get("name").and_then(Value::as_str) else { continue };
                if !allowed(judge.prompt(server, name)) {
                    continue;
                }
                let definition = offers.renamed(prompt, &names[server]);
                let key = definition.get("name").and_then(Value::as_str).unwrap_or(name).to_string();
                offers.prompts.push(Item { server, key, mcp_name: name.to_string(), definition });
            }
        }
        offers.servers = servers;
        offers.names = names;
        offers
    }

    /// `definition` with its `name` prefixed by the server's, when names are.
    fn renamed(&self, definition: &Value, server: &str) -> Value {
        let mut definition = definition.clone();
        if self.prefixed
            && let Some(Value::String(name)) = definition.get_mut("name")
        {
            *name = format!("{server}__{name}");
        }
        definition
    }

    /// The name a prompt of `server` is offered under.
    pub(crate) fn offered_name(&self, server: usize, name: &str) -> String {
        if self.prefixed { format!("{}__{name}", self.names[server]) } else { name.to_string() }
    }

    /// The message the frontends get.
    pub(crate) fn message(&self) -> proto::Features {
        let several = self.names.len() > 1;
        let offered = |server: usize, definition: &Value| proto::Offered {
            server: several.then(|| self.names[server].clone()),
            private: self.private.get(server).copied().unwrap_or(false),
            definition: definition.clone(),
        };
        proto::Features {
            resources: self.resources.iter().map(|i| offered(i.server, &i.definition)).collect(),
            templates: self.templates.iter().map(|t| offered(t.server, &t.definition)).collect(),
            prompts: self.prompts.iter().map(|i| offered(i.server, &i.definition)).collect(),
            has_resources: self.servers.iter().any(|o| o.has_resources),
            subscribe: self.servers.iter().any(|o| o.subscribe),
            has_prompts: self.servers.iter().any(|o| o.has_prompts),
            completions: self.servers.iter().any(|o| o.completions),
            logging: self.servers.iter().any(|o| o.logging),
        }
    }

    /// The resources as listed to code (`list_resources()`): each
    /// definition with its server's name when there are several.
    pub(crate) fn resources_for_code(&self) -> Vec<Value> {
        self.for_code(self.resources.iter().map(|i| (i.server, &i.definition)))
    }

    /// The resource templates as listed to code (`list_resource_templates()`).
    pub(crate) fn templates_for_code(&self) -> Vec<Value> {
        self.for_code(self.templates.iter().map(|t| (t.server, &t.definition)))
    }

    fn for_code<'a>(&self, items: impl Iterator<Item = (usize, &'a Value)>) -> Vec<Value> {
        let several = self.names.len() > 1;
        items
            .map(|(server, definition)| {
                let mut definition = definition.clone();
                if several && let Value::Object(map) = &mut definition {
                    map.insert("server".into(), Value::String(self.names[server].clone()));
                }
                definition
            })
            .collect()
    }

    /// Which server serves the resource `uri` (see the module doc), or why
    /// none does.
    pub(crate) fn resource_server(&self, uri: &str) -> Result<usize, String> {
        let listed: Vec<usize> = self.resources.iter().filter(|i| i.key == uri).map(|i| i.server).collect();
        if let Some(server) = self.single(&listed, uri)? {
            return Ok(server);
        }
        let matched: Vec<usize> = self.templates.iter().filter(|t| t.template.matches(uri)).map(|t| t.server).collect();
        if let Some(server) = self.single(&matched, uri)? {
            return Ok(server);
        }
        let offering: Vec<usize> = (0..self.servers.len()).filter(|i| self.servers[*i].has_resources).collect();
        match offering.as_slice() {
            [only] => Ok(*only),
            [] => Err("no wrapped server offers resources".to_string()),
            _ => Err(format!(
                "no wrapped server lists the resource {uri:?} or a template that matches it ({} servers offer resources)",
                offering.len()
            )),
        }
    }

    /// The one server of `found` (deduplicated), none, or an ambiguity.
    fn single(&self, found: &[usize], uri: &str) -> Result<Option<usize>, String> {
        let mut servers = found.to_vec();
        servers.sort_unstable();
        servers.dedup();
        match servers.as_slice() {
            [] => Ok(None),
            [one] => Ok(Some(*one)),
            many => Err(format!(
                "the resource {uri:?} is offered by several servers ({}), so it is ambiguous",
                many.iter().map(|i| self.names[*i].as_str()).collect::<Vec<_>>().join(", ")
            )),
        }
    }

    /// The server and listed name of the prompt offered as `name`.
    pub(crate) fn prompt(&self, name: &str) -> Option<(usize, &str)> {
        self.prompts.iter().find(|i| i.key == name).map(|i| (i.server, i.mcp_name.as_str()))
    }

    /// The offered names of the prompts (for a refusal that lists them).
    pub(crate) fn prompt_names(&self) -> Vec<&str> {
        self.prompts.iter().map(|i| i.key.as_str()).collect()
    }

    /// Which server a prompt the policy withholds belongs to, by its
    /// offered name (so a refusal can name the rule rather than call it
    /// unknown).
    pub(crate) fn withheld_prompt(&self, name: &str) -> Option<(usize, String)> {
        self.servers.iter().enumerate().find_map(|(server, offering)| {
            offering
                .prompts
                .iter()
                .filter_map(|p| p.get("name").and_then(Value::as_str))
                .find(|listed| self.offered_name(server, listed) == name)
                .map(|listed| (server, listed.to_string()))
        })
    }

    /// True when server `i`'s resources and prompts are private.
    pub(crate) fn is_private(&self, server: usize) -> bool {
        self.private.get(server).copied().unwrap_or(false)
    }

    /// The server's offering (its flags).
    pub(crate) fn offering(&self, server: usize) -> Option<&Offering> {
        self.servers.get(server).map(|o| &**o)
    }
}

/// A URI template (RFC 6570) as far as matching a URI against it goes:
/// literal text must match exactly; `{var}` matches one or more
/// characters other than `/`, `?` and `#`; `{+var}` and `{#var}` match
/// anything; `{/var}`, `{.var}`, `{;var}`, `{?var}` and `{&var}` match
/// their operator's part, which may also be absent.
#[derive(Debug, Clone)]
pub(crate) struct UriTemplate {
    parts: Vec<Part>,
}

#[derive(Debug, Clone, PartialEq)]
enum Part {
    Literal(String),
    /// A simple expansion: one or more characters, none of `stop`.
    Simple,
    /// A reserved or fragment expansion: any characters.
    Any,
    /// An operator's part (`/`, `.`, `;`, `?`, `&`): its prefix and then
    /// characters up to the next delimiter, or nothing.
    Optional(char),
}

impl UriTemplate {
    pub(crate) fn new(template: &str) -> Self {
        let mut parts = Vec::new();
        let mut literal = String::new();
        let mut chars = template.chars().peekable();
        while let Some(c) = chars.next() {
            if c != '{' {
                literal.push(c);
                continue;
            }
            let mut expression = String::new();
            for c in chars.by_ref() {
                if c == '}' {
                    break;
                }
                expression.push(c);
            }
            if !literal.is_empty() {
                parts.push(Part::Literal(std::mem::take(&mut literal)));
            }
            parts.push(match expression.chars().next() {
                Some('+') | Some('#') => Part::Any,
                Some(op @ ('/' | '.' | ';' | '?' | '&')) => Part::Optional(op),
                _ => Part::Simple,
            });
        }
        if !literal.is_empty() {
            parts.push(Part::Literal(literal));
        }
        Self { parts }
    }

    /// True when `uri` is an expansion of the template.
    pub(crate) fn matches(&self, uri: &str) -> bool {
        matches_from(&self.parts, uri)
    }
}

fn matches_from(parts: &[Part], rest: &str) -> bool {
    let Some((part, more)) = parts.split_first() else { return rest.is_empty() };
    match part {
        Part::Literal(text) => rest.strip_prefix(text.as_str()).is_some_and(|rest| matches_from(more, rest)),
        Part::Simple => {
            let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
            (1..=end).rev().filter(|i| rest.is_char_boundary(*i)).any(|i| matches_from(more, &rest[i..]))
        }
        Part::Any => {
            (0..=rest.len()).rev().filter(|i| rest.is_char_boundary(*i)).any(|i| matches_from(more, &rest[i..]))
        }
        Part::Optional(op) => {
            if matches_from(more, rest) {
                return true;
            }
            let prefix = match op {
                '&' => '&',
                '?' => '?',
                other => *other,
            };
            let Some(after) = rest.strip_prefix(prefix) else { return false };
            let stop: &[char] = match op {
                '?' | '&' => &['#'],
                _ => &['/', '?', '#'],
            };
            let end = after.find(stop).unwrap_or(after.len());
            (0..=end).rev().filter(|i| after.is_char_boundary(*i)).any(|i| matches_from(more, &after[i..]))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_uri_template_matches_its_expansions_and_nothing_else() {
        let t = UriTemplate::new("test://template/{id}/data");
        assert!(t.matches("test://template/123/data"));
        assert!(!t.matches("test://template//data"), "a simple expansion is not empty");
        assert!(!t.matches("test://template/1/2/data"), "a simple expansion holds no slash");
        assert!(!t.matches("test://template/123/data/more"));
        let t = UriTemplate::new("file:///{+path}");
        assert!(t.matches("file:///a/b/c.txt"));
        let t = UriTemplate::new("search://items{?q,limit}");
        assert!(t.matches("search://items"));
        assert!(t.matches("search://items?q=x&limit=3"));
        assert!(!t.matches("search://itemsX"));
        let t = UriTemplate::new("demo://resource/static/document/{filename}");
        assert!(t.matches("demo://resource/static/document/architecture.md"));
    }

    struct AllowAll;
    impl Judge for AllowAll {
        fn resource(&self, _: usize, _: &str) -> Option<Admission> {
            None
        }
        fn prompt(&self, _: usize, _: &str) -> Option<Admission> {
            None
        }
    }

    fn offering(resources: &[&str], templates: &[&str], prompts: &[&str]) -> Arc<Offering> {
        Arc::new(Offering {
            resources: resources.iter().map(|u| serde_json::json!({"uri": u, "name": u})).collect(),
            templates: templates.iter().map(|u| serde_json::json!({"uriTemplate": u, "name": "t"})).collect(),
            prompts: prompts.iter().map(|n| serde_json::json!({"name": n})).collect(),
            has_resources: !resources.is_empty() || !templates.is_empty(),
            has_prompts: !prompts.is_empty(),
            ..Offering::default()
        })
    }

    #[test]
    fn a_uri_goes_to_the_server_listing_it_else_to_the_one_whose_template_matches_and_a_shared_one_is_ambiguous() {
        let offers = Offers::build(
            vec![
                offering(&["a://1", "same://x"], &["a://t/{id}"], &["greet"]),
                offering(&["b://1", "same://x"], &["b://t/{id}"], &["greet"]),
            ],
            vec!["one".into(), "two".into()],
            true,
            vec![false, true],
            &AllowAll,
        );
        assert_eq!(offers.resource_server("a://1"), Ok(0));
        assert_eq!(offers.resource_server("b://t/9"), Ok(1));
        let ambiguous = offers.resource_server("same://x").unwrap_err();
        assert!(ambiguous.contains("one, two"), "{ambiguous}");
        assert!(offers.resource_server("c://nothing").unwrap_err().contains("2 servers offer resources"));
        assert_eq!(offers.prompt("two__greet"), Some((1, "greet")));
        assert_eq!(offers.prompt("greet"), None, "prefixed names only");
        let message = offers.message();
        assert_eq!(message.prompts[0].definition["name"], "one__greet");
        assert_eq!(message.resources[0].definition["uri"], "a://1", "a URI is never renamed");
        assert!(message.resources.iter().all(|r| r.private == (r.server.as_deref() == Some("two"))));
    }

    #[test]
    fn with_one_server_offering_resources_any_uri_goes_to_it() {
        let offers =
            Offers::build(vec![offering(&["a://1"], &[], &[])], vec!["only".into()], false, vec![false], &AllowAll);
        assert_eq!(offers.resource_server("a://unlisted"), Ok(0));
        let none = Offers::build(vec![offering(&[], &[], &[])], vec!["x".into()], false, vec![false], &AllowAll);
        assert!(none.resource_server("a://1").is_err());
    }
}
