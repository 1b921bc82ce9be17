//! A throw-away certificate for a launched target served over TLS (`--target nginx --tls`):
//! a CA of the run's own and a server certificate it signs for 127.0.0.1 and localhost,
//! written as PEM into the target's temporary directory (removed with it).
//!
//! A CA and a leaf rather than one self-signed certificate: rustls (webpki) refuses a CA
//! certificate presented as the server's own, and a self-signed leaf is not a CA to trust.
//! The generator trusts the CA for the run (as `--cacert` would); nothing else does.

use std::path::{Path, PathBuf};

use crate::Error;

/// Where a launched target's TLS files are.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsFiles {
    /// The CA certificate to trust (`--cacert`).
    pub ca: PathBuf,
    /// The server's certificate (PEM).
    pub cert: PathBuf,
    /// The server's private key (PEM, PKCS#8).
    pub key: PathBuf,
}

/// Makes a CA and a server certificate for 127.0.0.1 and localhost and writes them into
/// `dir`.
pub fn write_throwaway(dir: &Path) -> Result<TlsFiles, Error> {
    use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, KeyPair};
    let made = |e: rcgen::Error| Error::BadSpec(format!("cannot make a TLS certificate: {e}"));
    let mut ca = CertificateParams::new(Vec::<String>::new()).map_err(made)?;
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca.distinguished_name
        .push(DnType::CommonName, "tailscope throw-away CA");
    let ca_key = KeyPair::generate().map_err(made)?;
    let ca_cert = ca.self_signed(&ca_key).map_err(made)?;
    let mut leaf = CertificateParams::new(vec!["127.0.0.1".to_string(), "localhost".to_string()])
        .map_err(made)?;
    leaf.distinguished_name
        .push(DnType::CommonName, "tailscope target");
    let leaf_key = KeyPair::generate().map_err(made)?;
    let leaf_cert = leaf.signed_by(&leaf_key, &ca_cert, &ca_key).map_err(made)?;
    let files = TlsFiles {
        ca: dir.join("ca.pem"),
        cert: dir.join("server.pem"),
        key: dir.join("server.key"),
    };
    for (path, pem) in [
        (&files.ca, ca_cert.pem()),
        (&files.cert, leaf_cert.pem()),
        (&files.key, leaf_key.serialize_pem()),
    ] {
        std::fs::write(path, pem).map_err(|error| Error::Write {
            path: path.clone(),
            error,
        })?;
    }
    Ok(files)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_a_ca_and_a_leaf_it_signed() {
        let dir = std::env::temp_dir().join(format!("ts-cert-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let files = write_throwaway(&dir).unwrap();
        let ca = std::fs::read_to_string(&files.ca).unwrap();
        let cert = std::fs::read_to_string(&files.cert).unwrap();
        let key = std::fs::read_to_string(&files.key).unwrap();
        assert!(ca.starts_with("-----BEGIN CERTIFICATE-----"), "{ca}");
        assert!(cert.starts_with("-----BEGIN CERTIFICATE-----"), "{cert}");
        assert!(key.contains("PRIVATE KEY"), "{key}");
        assert_ne!(ca, cert);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
