import pytest
from pydantic import ValidationError
from sounding.settings.config import Settings, StoreSettings, TlsSettings

pytestmark = pytest.mark.unit


def test_the_store_defaults_to_a_directory_under_the_data_directory(tmp_path):
    location = Settings(data_dir=tmp_path).store_location
    assert location.uri == str(tmp_path / "lancedb") and location.local_path == location.uri
    assert dict(location.options) == {}


def test_an_s3_store_carries_its_endpoint_region_and_credentials_as_lancedb_options(monkeypatch):
    monkeypatch.setenv("SOUNDING_STORE__URI", "s3://sounding-store/prod")
    monkeypatch.setenv("SOUNDING_STORE__ENDPOINT", "http://minio:9000")
    monkeypatch.setenv("SOUNDING_STORE__ALLOW_HTTP", "true")
    monkeypatch.setenv("SOUNDING_STORE__ACCESS_KEY_ID", "AKIA")
    monkeypatch.setenv("SOUNDING_STORE__SECRET_ACCESS_KEY", "hush")
    location = Settings().store_location
    assert location.uri == "s3://sounding-store/prod" and location.local_path is None
    assert dict(location.options) == {
        "aws_endpoint": "http://minio:9000",
        "allow_http": "true",
        "aws_access_key_id": "AKIA",
        "aws_secret_access_key": "hush",
    }
    assert "hush" not in repr(location) and "hush" not in repr(Settings().store)


@pytest.mark.parametrize("uri", ["gs://bucket/x", "/var/lib/sounding", "s3://Bad_Bucket/x", "s3://"])
def test_a_store_uri_is_empty_or_an_s3_bucket(uri):
    with pytest.raises(ValidationError, match="uri"):
        StoreSettings(uri=uri)


@pytest.mark.parametrize(
    ("files", "complaint"),
    [
        (
            {"ca_file": "ca.pem", "client_cert_file": "c.pem"},
            "needs both client_cert_file and",
        ),
        (
            {"ca_file": "ca.pem", "client_key_file": "k.pem"},
            "needs both client_cert_file and",
        ),
        ({"client_cert_file": "c.pem", "client_key_file": "k.pem"}, "needs ca_file"),
    ],
)
def test_a_client_certificate_is_refused_at_load_unless_complete(files, complaint):
    with pytest.raises(ValidationError, match=complaint):
        TlsSettings(**files)
    TlsSettings(ca_file="ca.pem", client_cert_file="c.pem", client_key_file="k.pem")
