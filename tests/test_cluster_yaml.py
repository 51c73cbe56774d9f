"""cluster.yaml must satisfy Ray's own cluster-launcher schema (ray/autoscaler/ray-schema.json)."""

from __future__ import annotations

import yaml

from lexray.paths import REPO_ROOT


def test_cluster_yaml_validates_against_rays_schema():
    from ray.autoscaler._private.util import validate_config

    config = yaml.safe_load((REPO_ROOT / "cluster.yaml").read_text())
    validate_config(config)  # raises jsonschema.ValidationError / ValueError on a bad config
    assert config["head_node_type"] in config["available_node_types"]
    gpu_types = [n for n in config["available_node_types"] if n.startswith("gpu_")]
    assert gpu_types and all(config["available_node_types"][n]["max_workers"] > 0 for n in gpu_types)
    assert any("pip install -e ." in c for c in config["setup_commands"])


def test_schema_check_is_not_vacuous():
    import jsonschema
    import pytest
    from ray.autoscaler._private.util import validate_config

    config = yaml.safe_load((REPO_ROOT / "cluster.yaml").read_text())
    config["available_node_types"]["head"]["no_such_field"] = 1
    with pytest.raises(jsonschema.ValidationError, match="'no_such_field' was unexpected"):
        validate_config(config)
