//! Data files of this app id that no snapshot references: windows whose commit never happened (a
//! run killed mid-window or while its commit was on its way, a failed or refused commit).
//!
//! Removed once per table and run, after the run's first commit to it: from then on a killed run's
//! commit still on its way asserts a snapshot that is no longer the table's and is refused, so
//! none of its files can become referenced. Only files
//! - named by this app id (`picomq-<app_id>-<uuid>-<n>.parquet`, `is_ours`): never another
//!   writer's, nor another app id's;
//! - older than the run's start and than `orphan_file_age` (other instances of the definition
//!   share the app id and may hold a window open);
//! - under the table's data location, when that is inside the table's location (not a
//!   `write.data.path` other tables may share), and referenced by no manifest of any snapshot of
//!   the table's metadata (branches and tags too), read after the listing.
use std::collections::HashSet;
use std::time::SystemTime;

use iceberg::table::Table;

use crate::storage::{Files, Listed};

/// Whether `file_name` is a data file this app id wrote: `picomq-<app_id>-<uuid>-<digits>.parquet`
/// exactly, so that app id `a` never takes a file of app id `a-b`.
pub fn is_ours(file_name: &str, app_id: &str) -> bool {
    let Some(rest) = file_name.strip_prefix(&format!("picomq-{app_id}-")) else {
        return false;
    };
    let (Some(id), Some(tail)) = (rest.get(..36), rest.get(36..)) else {
        return false;
    };
    uuid::Uuid::try_parse(id).is_ok()
        && tail
            .strip_prefix('-')
            .and_then(|t| t.strip_suffix(".parquet"))
            .map(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
            .unwrap_or(false)
}

fn file_name(path: &str) -> &str {
    path.rsplit('/').next().unwrap_or(path)
}

/// Where the table's data files go, as iceberg-rust's DefaultLocationGenerator puts them; None
/// when that is not inside the table's location (`write.data.path` elsewhere): a location other
/// tables may share, whose files this table's snapshots do not account for.
pub fn data_location(table: &Table) -> Option<String> {
    let m = table.metadata();
    let location = m.location().trim_end_matches('/');
    let props = m.properties();
    let data = props
        .get("write.data.path")
        .or_else(|| props.get("write.folder-storage.path"))
        .map(|p| p.trim_end_matches('/').to_string())
        .unwrap_or_else(|| format!("{location}/data"));
    data.starts_with(&format!("{location}/")).then_some(data)
}

/// The names of every file a manifest of any snapshot of `table` lists.
async fn referenced(table: &Table) -> iceberg::Result<HashSet<String>> {
    let mut manifests = HashSet::new();
    let mut names = HashSet::new();
    for snapshot in table.metadata().snapshots() {
        let list = table.manifest_list_reader(snapshot).load().await?;
        for m in list.entries() {
            if !manifests.insert(m.manifest_path.clone()) {
                continue;
            }
            for e in m.load_manifest(table.file_io()).await?.entries() {
                names.insert(file_name(e.file_path()).to_string());
            }
        }
    }
    Ok(names)
}

/// What a cleanup found.
#[derive(Debug, Default, PartialEq)]
pub struct Cleaned {
    pub removed: usize,
    /// This app id's files that a snapshot references.
    pub referenced: usize,
    /// This app id's unreferenced files too recent to remove.
    pub recent: usize,
}

/// This app id's data files under `table`'s data location (none when it is not the table's own).
pub async fn listed(files: &Files, table: &Table, app_id: &str) -> iceberg::Result<Vec<Listed>> {
    let Some(location) = data_location(table) else {
        return Ok(Vec::new());
    };
    Ok(files
        .list(&location)
        .await?
        .into_iter()
        .filter(|f| is_ours(file_name(&f.path), app_id))
        .collect())
}

/// Removes the files of `listed` that no snapshot of `table` references and older than `before`.
/// `table` is read after the listing: a file committed meanwhile is seen as referenced.
pub async fn remove(files: &Files, table: &Table, listed: Vec<Listed>, before: SystemTime) -> iceberg::Result<Cleaned> {
    let mut cleaned = Cleaned::default();
    if listed.is_empty() {
        return Ok(cleaned);
    }
    let referenced = referenced(table).await?;
    for f in listed {
        if referenced.contains(file_name(&f.path)) {
            cleaned.referenced += 1;
        } else if f.modified >= before {
            cleaned.recent += 1;
        } else {
            iceberg::io::Storage::delete(files, &f.path).await?;
            cleaned.removed += 1;
        }
    }
    Ok(cleaned)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_this_app_ids_file_names_are_ours() {
        let id = "6f1c2a3b-0000-4000-8000-00000000abcd";
        assert!(is_ours(&format!("picomq-a-{id}-00000.parquet"), "a"));
        assert!(is_ours(&format!("picomq-a-b-{id}-00012.parquet"), "a-b"));
        assert!(
            !is_ours(&format!("picomq-a-b-{id}-00012.parquet"), "a"),
            "another app id's"
        );
        assert!(!is_ours(&format!("picomq-a-{id}-00000.parquet"), "a-b"));
        assert!(!is_ours(&format!("00000-0-{id}.parquet"), "a"), "another writer's");
        assert!(!is_ours(&format!("picomq-a-{id}-00000.avro"), "a"));
        assert!(!is_ours(&format!("picomq-a-{id}-.parquet"), "a"));
        assert!(!is_ours("picomq-a-not-a-uuid-00000.parquet", "a"));
        assert!(!is_ours(&format!("picomq-a-{id}-00000.parquet.tmp"), "a"));
    }
}
