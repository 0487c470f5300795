//! `--set key=value` overrides applied to scenario text before it is
//! parsed (so an override is checked like the line it replaces).

use super::ScenarioError;

/// Applies `key=value` overrides to scenario text. A key is a dotted path
/// from the top (`duration`, `defaults.link.rate`) or starting with the
/// name of a switch, router, host or link (`agg1.params.flows`); a list of
/// tables is entered by index or element name (`h1.workload.0.rate`). Values are
/// TOML (`5`, `"10Gbps"`, `true`); a bare word is taken as a string.
pub fn apply_overrides(text: &str, overrides: &[String]) -> Result<String, ScenarioError> {
    if overrides.is_empty() {
        return Ok(text.to_string());
    }
    let mut doc: toml_edit::DocumentMut = text
        .parse()
        .map_err(|e| ScenarioError(format!("scenario is not valid TOML: {e}")))?;
    for item in overrides {
        let (key, value) = item
            .split_once('=')
            .ok_or_else(|| ScenarioError(format!("--set expects key=value, got {item:?}")))?;
        let (key, value) = (key.trim(), value.trim());
        let value: toml_edit::Value = value
            .parse()
            .unwrap_or_else(|_| toml_edit::Value::from(value));
        let path: Vec<&str> = key.split('.').collect();
        let (first, rest) = path
            .split_first()
            .ok_or_else(|| ScenarioError("empty --set key".into()))?;
        let table: &mut dyn toml_edit::TableLike = if doc.contains_key(first) && !rest.is_empty() {
            doc.get_mut(first)
                .and_then(|i| i.as_table_like_mut())
                .ok_or_else(|| ScenarioError(format!("--set {key}: {first} is not a table")))?
        } else if rest.is_empty() {
            doc.as_table_mut()
        } else {
            find_named(&mut doc, first).ok_or_else(|| {
                ScenarioError(format!(
                    "--set {key}: no top-level key and no switch, smart NIC, router, host or link named {first:?}"
                ))
            })?
        };
        let leaf_path = if rest.is_empty() { &path[..] } else { rest };
        set_path(table, leaf_path, value)
            .map_err(|e| ScenarioError(format!("--set {key}: {e}")))?;
    }
    Ok(doc.to_string())
}

fn find_named<'a>(
    doc: &'a mut toml_edit::DocumentMut,
    name: &str,
) -> Option<&'a mut dyn toml_edit::TableLike> {
    // Find it first, then borrow it mutably once.
    let (kind, index) = ["switch", "smartnic", "router", "host", "server", "link"]
        .into_iter()
        .find_map(|kind| {
            let arr = doc.get(kind)?.as_array_of_tables()?;
            let index = arr.iter().position(|t| {
                t.get("name").and_then(|v| v.as_str()) == Some(name)
                    || (kind == "link"
                        && t.get("name").is_none()
                        && link_default_name(
                            t.get("a").and_then(|v| v.as_str()),
                            t.get("b").and_then(|v| v.as_str()),
                        )
                        .as_deref()
                            == Some(name))
            })?;
            Some((kind, index))
        })?;
    let t = doc
        .get_mut(kind)?
        .as_array_of_tables_mut()?
        .get_mut(index)?;
    Some(t)
}

fn set_path(
    table: &mut dyn toml_edit::TableLike,
    path: &[&str],
    value: toml_edit::Value,
) -> Result<(), String> {
    let (last, parents) = path.split_last().ok_or("empty key")?;
    let mut t = table;
    let mut i = 0;
    while i < parents.len() {
        let p = parents[i];
        // An array of tables (a host's `workload`s) is entered by index or
        // by an element's `name`: `h1.workload.0.rate`, `h1.workload.bg.rate`.
        if t.get(p).is_some_and(|item| item.is_array_of_tables()) {
            let sel = *parents.get(i + 1).ok_or_else(|| {
                format!("{p} is a list: name an element by index or name, e.g. {p}.0.FIELD")
            })?;
            let arr = t
                .get_mut(p)
                .and_then(|item| item.as_array_of_tables_mut())
                .ok_or_else(|| format!("{p} is not a list"))?;
            let len = arr.len();
            let index = match sel.parse::<usize>() {
                Ok(n) => Some(n),
                Err(_) => arr
                    .iter()
                    .position(|e| e.get("name").and_then(|v| v.as_str()) == Some(sel)),
            };
            t = index
                .and_then(|n| arr.get_mut(n))
                .map(|e| e as &mut dyn toml_edit::TableLike)
                .ok_or_else(|| format!("{p} has {len} elements and none is {sel:?}"))?;
            i += 2;
            continue;
        }
        // So is a list of inline tables (`workload = [{ .. }]`, as a `--set`
        // writes one).
        let inline_list = t
            .get(p)
            .and_then(|item| item.as_array())
            .is_some_and(|a| !a.is_empty() && a.iter().all(|v| v.is_inline_table()));
        if inline_list {
            let sel = *parents.get(i + 1).ok_or_else(|| {
                format!("{p} is a list: name an element by index or name, e.g. {p}.0.FIELD")
            })?;
            let arr = t
                .get_mut(p)
                .and_then(|item| item.as_array_mut())
                .ok_or_else(|| format!("{p} is not a list"))?;
            let len = arr.len();
            let index = match sel.parse::<usize>() {
                Ok(n) => Some(n),
                Err(_) => arr.iter().position(|v| {
                    v.as_inline_table()
                        .and_then(|e| e.get("name"))
                        .and_then(|v| v.as_str())
                        == Some(sel)
                }),
            };
            t = index
                .and_then(|n| arr.get_mut(n))
                .and_then(|v| v.as_inline_table_mut())
                .map(|e| e as &mut dyn toml_edit::TableLike)
                .ok_or_else(|| format!("{p} has {len} elements and none is {sel:?}"))?;
            i += 2;
            continue;
        }
        if !t.contains_key(p) {
            t.insert(
                p,
                toml_edit::Item::Value(toml_edit::Value::InlineTable(Default::default())),
            );
        }
        t = t
            .get_mut(p)
            .and_then(|i| i.as_table_like_mut())
            .ok_or_else(|| format!("{p} is not a table"))?;
        i += 1;
    }
    t.insert(last, toml_edit::Item::Value(value));
    Ok(())
}

fn link_default_name(a: Option<&str>, b: Option<&str>) -> Option<String> {
    let node = |s: &str| s.split(':').next().unwrap_or(s).to_string();
    Some(format!("{}-{}", node(a?), node(b?)))
}
