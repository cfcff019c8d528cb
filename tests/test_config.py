"""Config: typed, validated once, unknown keys fail with a fix, no code execution."""

from __future__ import annotations

from pathlib import Path

import pytest

from pulsar_model.errors import ConfigError
from pulsar_model.pipeline.config import DEFAULT_CONFIG_PATH, flatten_config, load_config


def test_load_config_local_default():
    config = load_config("conf/local.yaml")
    assert config.spark.master == "local[2]"
    assert config.storage.warehouse == "warehouse"
    assert config.pulsar.version_for("nowhere") == config.pulsar.default_version


@pytest.mark.parametrize("path", ["conf/cluster.example.yaml", "conf/databricks.example.yaml"])
def test_load_config_examples_are_valid(path):
    assert load_config(path).spark.master is None


def test_load_config_unknown_key_names_the_fix(tmp_path):
    p = tmp_path / "c.yaml"
    p.write_text("storage:\n  warehous: x\n")
    with pytest.raises(
        ConfigError, match=r"'storage.warehous'.*accepted keys under 'storage': delta_backend"
    ):
        load_config(p)


def test_load_config_overrides_and_types(tmp_path):
    config = load_config(None, ["spark.master=local[1]", "demo.seed=7", "pulsar.cluster_versions={a: 3.0.7}"])
    assert config.spark.master == "local[1]" and config.demo.seed == 7
    assert config.pulsar.version_for("a") == "3.0.7"
    with pytest.raises(ConfigError, match="must be an integer"):
        load_config(None, ["demo.seed=seven"])
    with pytest.raises(ConfigError, match="Unknown Pulsar version 'latest'"):
        load_config(None, ["pulsar.default_version=latest"])


def test_load_config_never_executes_code(tmp_path):
    p = tmp_path / "evil.yaml"
    p.write_text("spark: !!python/object/apply:os.system ['touch pwned']\n")
    with pytest.raises(ConfigError, match="not valid YAML"):
        load_config(p)
    assert not (tmp_path / "pwned").exists()


def test_load_config_broker_and_compaction_sections():
    config = load_config(
        "conf/local.yaml",
        [
            "broker.active_consumer_failover_consistent_hashing=true",
            "compaction.namespace_thresholds={acme/orders: 1048576}",
        ],
    )
    assert config.broker.active_consumer_failover_consistent_hashing is True
    assert config.broker.schema_compatibility_strategy == "FULL"
    assert config.compaction.namespace_thresholds == {"acme/orders": "1048576"}
    with pytest.raises(ConfigError, match=r"compaction.topic_thresholds.t = '1 MB' is not a byte count"):
        load_config(None, ["compaction.topic_thresholds={t: 1 MB}"])
    with pytest.raises(ConfigError, match="transaction_long_open_threshold_ms = 0 must be positive"):
        load_config(None, ["broker.transaction_long_open_threshold_ms=0"])
    with pytest.raises(ConfigError, match="must be true or false"):
        load_config(None, ["broker.active_consumer_failover_consistent_hashing=yes please"])


@pytest.mark.parametrize("version", ["3.0", "4.0.8-SNAPSHOT", "3.1.4.4", "5.0.0"])
def test_load_config_rejects_versions_the_stages_cannot_run(version):
    # One rule at load time, the one every stage applies (pulsar_model.domain.versions.PulsarVersion.parse): a
    # version a stage would refuse never gets past the configuration.
    with pytest.raises(ConfigError) as info:
        load_config(None, [f"pulsar.cluster_versions={{us-east: {version}}}"])
    message = str(info.value)
    assert "pulsar.cluster_versions.us-east" in message and repr(version) in message
    assert "Supported lines: 2.x" in message


def test_load_config_embedded_default_is_the_same_from_any_folder(tmp_path, monkeypatch):
    """The default ships inside the package: no conf/ folder is needed where the command runs."""
    from_checkout = load_config(None)
    monkeypatch.chdir(tmp_path)
    assert load_config(None) == from_checkout
    assert from_checkout.spark.driver_memory == "auto"
    assert from_checkout.spark.conf == {"spark.sql.shuffle.partitions": "8"}
    assert from_checkout.storage.warehouse == "warehouse"
    # conf/local.yaml (DESIGN: "the embedded default") is that same file.
    assert (Path(__file__).resolve().parents[1] / "conf" / "local.yaml").resolve() == DEFAULT_CONFIG_PATH


def test_load_config_file_replaces_the_default_and_set_overrides(tmp_path):
    p = tmp_path / "c.yaml"
    p.write_text("spark:\n  master: null\nstorage:\n  warehouse: /data/wh\n")
    config = load_config(p, ["spark.driver_memory=8g", "report_dir=/tmp/r"])
    assert config.spark.master is None and config.spark.conf == {}
    assert (config.storage.warehouse, config.spark.driver_memory, config.report_dir) == (
        "/data/wh",
        "8g",
        "/tmp/r",
    )


def test_load_config_override_keys_under_a_mapping_keep_their_dots():
    config = load_config(
        None,
        ["spark.conf.spark.sql.shuffle.partitions=16", "pulsar.cluster_versions.us-east=3.0.7"],
    )
    assert config.spark.conf == {"spark.sql.shuffle.partitions": "16"}
    assert config.pulsar.version_for("us-east") == "3.0.7"


@pytest.mark.parametrize("value", ["lots", "8 gigs", "-1g"])
def test_load_config_rejects_a_driver_memory_that_is_no_size(value):
    with pytest.raises(ConfigError, match=r"spark.driver_memory = .*write 'auto'"):
        load_config(None, [f"spark.driver_memory={value}"])


def test_flatten_config_lists_every_setting():
    flat = flatten_config(load_config(None))
    assert flat["spark.driver_memory"] == "auto" and flat["report_dir"] == "reports"
    assert "broker.schema_compatibility_strategy" in flat and "spark.conf" in flat
