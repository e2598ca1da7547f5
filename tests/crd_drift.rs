//! `crds/` holds exactly what the API types generate (`capwasm crds --output-dir crds`).

use std::collections::BTreeSet;
use std::path::PathBuf;

fn crds_dir() -> PathBuf {
    PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../crds"))
}

#[test]
fn crds_directory_matches_the_api_types() {
    let mut drifted = Vec::new();
    let mut expected_files = BTreeSet::from(["kustomization.yaml".to_owned()]);
    let mut names = Vec::new();
    for crd in capwasm::api::published_crds().unwrap() {
        let (file, generated) = capwasm::api::crds_yaml(&crd).unwrap();
        let on_disk = std::fs::read_to_string(crds_dir().join(&file)).unwrap_or_default();
        if on_disk != generated {
            drifted.push(file.clone());
        }
        names.push(file.clone());
        expected_files.insert(file);
    }
    let kustomization =
        std::fs::read_to_string(crds_dir().join("kustomization.yaml")).unwrap_or_default();
    if kustomization != capwasm::api::crds_kustomization(&names) {
        drifted.push("kustomization.yaml".into());
    }
    let stray: Vec<String> = std::fs::read_dir(crds_dir())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|name| {
            std::path::Path::new(name)
                .extension()
                .is_some_and(|e| e.eq_ignore_ascii_case("yaml"))
                && !expected_files.contains(name)
        })
        .collect();
    assert!(
        drifted.is_empty() && stray.is_empty(),
        "crds/ is out of date (changed: {drifted:?}, not generated: {stray:?}); \
         run `cargo run -p capwasm -- crds --output-dir crds`"
    );
}
