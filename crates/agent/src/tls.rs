//! The link's TLS: the agent's self-signed certificate, made at start, and the run's
//! verifier that pins it by its SHA-256 fingerprint (the handshake's signatures are still
//! checked, through webpki, against the certificate presented).

use std::sync::Arc;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::CryptoProvider;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer, ServerName, UnixTime};
use rustls::{ClientConfig, DigitallySignedStruct, ServerConfig, SignatureScheme};

use crate::Error;

/// The name in the agent's certificate (and the one the run asks for: the pin is what
/// identifies the agent, not a name).
pub const AGENT_NAME: &str = "tailscope-agent";

fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// The SHA-256 of a certificate, as lowercase hex pairs joined by `:`.
pub fn fingerprint(cert: &[u8]) -> String {
    let digest = ring::digest::digest(&ring::digest::SHA256, cert);
    digest
        .as_ref()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect::<Vec<_>>()
        .join(":")
}

/// A fingerprint as the user may write it (`SHA256:` in front or not, `:` between the
/// pairs or not, any case), normalised to [`fingerprint`]'s form.
pub fn parse_fingerprint(text: &str) -> Result<String, String> {
    let t = text.trim();
    let t = t
        .strip_prefix("SHA256:")
        .or_else(|| t.strip_prefix("sha256:"))
        .unwrap_or(t);
    let hex: String = t.chars().filter(|c| *c != ':').collect();
    if hex.len() != 64 || !hex.chars().all(|c| c.is_ascii_hexdigit()) {
        return Err(format!(
            "{text:?} is not a SHA-256 fingerprint: 64 hex digits (':' between pairs allowed), as the agent prints it"
        ));
    }
    let hex = hex.to_ascii_lowercase();
    Ok((0..32)
        .map(|i| &hex[2 * i..2 * i + 2])
        .collect::<Vec<_>>()
        .join(":"))
}

/// The agent's TLS side: a fresh self-signed certificate and its fingerprint.
pub struct AgentTls {
    /// The server configuration for every client.
    pub config: Arc<ServerConfig>,
    /// The certificate's fingerprint, for the run's `--agent-fingerprint`.
    pub fingerprint: String,
}

/// The certificate's file in a `--cert-dir` (DER).
pub const CERT_FILE: &str = "agent-cert.der";
/// The private key's file in a `--cert-dir` (PKCS#8 DER, mode 0600).
pub const KEY_FILE: &str = "agent-key.der";

/// Makes the agent's certificate and its server configuration; with `cert_dir`, the
/// certificate kept there is used (made and kept there the first time), so that its
/// fingerprint, pinned by the runs, survives the agent's restarts.
pub fn agent_tls(cert_dir: Option<&std::path::Path>) -> Result<AgentTls, Error> {
    let (cert, key) = match cert_dir {
        Some(dir) => kept_certificate(dir)?,
        None => new_certificate()?,
    };
    let fingerprint = fingerprint(&cert);
    let config = ServerConfig::builder_with_provider(provider())
        .with_protocol_versions(&[&rustls::version::TLS13])
        .map_err(|e| Error::Tls(e.to_string()))?
        .with_no_client_auth()
        .with_single_cert(
            vec![cert],
            PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key)),
        )
        .map_err(|e| Error::Tls(e.to_string()))?;
    Ok(AgentTls {
        config: Arc::new(config),
        fingerprint,
    })
}

/// The run's TLS side: the agent's certificate must have `pinned` as its fingerprint; with
/// none pinned, any certificate is accepted and [`SeenFingerprint`] tells which it was.
pub fn run_tls(pinned: Option<String>) -> (Arc<ClientConfig>, Arc<SeenFingerprint>) {
    let provider = provider();
    let verifier = Arc::new(SeenFingerprint {
        pinned,
        seen: std::sync::Mutex::new(None),
        provider: provider.clone(),
    });
    let config = ClientConfig::builder_with_provider(provider)
        .with_protocol_versions(&[&rustls::version::TLS13])
        .expect("TLS 1.3 is in the ring provider")
        .dangerous()
        .with_custom_certificate_verifier(verifier.clone())
        .with_no_client_auth();
    (Arc::new(config), verifier)
}

/// The server name the run asks for.
pub fn agent_name() -> ServerName<'static> {
    ServerName::try_from(AGENT_NAME).expect("a valid DNS name")
}

/// Pins the agent's certificate by fingerprint, and remembers the one presented.
#[derive(Debug)]
pub struct SeenFingerprint {
    pinned: Option<String>,
    seen: std::sync::Mutex<Option<String>>,
    provider: Arc<CryptoProvider>,
}

impl SeenFingerprint {
    /// The fingerprint of the certificate the agent presented, once it did.
    pub fn seen(&self) -> Option<String> {
        self.seen.lock().ok()?.clone()
    }
}

impl ServerCertVerifier for SeenFingerprint {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        let seen = fingerprint(end_entity);
        if let Ok(mut s) = self.seen.lock() {
            *s = Some(seen.clone());
        }
        match &self.pinned {
            Some(pinned) if *pinned != seen => Err(rustls::Error::General(format!(
                "the agent's certificate has fingerprint {seen}, not the pinned {pinned} (--agent-fingerprint): another agent, or a machine in the middle"
            ))),
            _ => Ok(ServerCertVerified::assertion()),
        }
    }

    // The handshake's signatures prove the peer holds the certificate's key: checked by
    // webpki (rustls' verify functions) as for any certificate.
    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.provider
            .signature_verification_algorithms
            .supported_schemes()
    }
}

/// A fresh self-signed certificate and its PKCS#8 key, both DER.
fn new_certificate() -> Result<(CertificateDer<'static>, Vec<u8>), Error> {
    let made = rcgen::generate_simple_self_signed(vec![AGENT_NAME.to_string()])
        .map_err(|e| Error::Tls(format!("cannot make the agent's certificate: {e}")))?;
    Ok((made.cert.der().clone(), made.key_pair.serialize_der()))
}

/// The certificate kept in `dir`, made and written there when it holds none.
fn kept_certificate(dir: &std::path::Path) -> Result<(CertificateDer<'static>, Vec<u8>), Error> {
    let (cert_path, key_path) = (dir.join(CERT_FILE), dir.join(KEY_FILE));
    let said = |what: &std::path::Path, e: std::io::Error| {
        Error::Usage(format!("{} (--cert-dir): {e}", what.display()))
    };
    match (cert_path.exists(), key_path.exists()) {
        (true, true) => {
            let cert = std::fs::read(&cert_path).map_err(|e| said(&cert_path, e))?;
            let key = std::fs::read(&key_path).map_err(|e| said(&key_path, e))?;
            Ok((CertificateDer::from(cert), key))
        }
        (false, false) => {
            std::fs::create_dir_all(dir).map_err(|e| said(dir, e))?;
            let (cert, key) = new_certificate()?;
            std::fs::write(&cert_path, cert.as_ref()).map_err(|e| said(&cert_path, e))?;
            // The key is readable by the agent's user alone.
            use std::io::Write as _;
            use std::os::unix::fs::OpenOptionsExt as _;
            std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o600)
                .open(&key_path)
                .and_then(|mut f| f.write_all(&key))
                .map_err(|e| said(&key_path, e))?;
            Ok((cert, key))
        }
        _ => Err(Error::Usage(format!(
            "{} holds one of {CERT_FILE} and {KEY_FILE} without the other (--cert-dir): restore it, or remove it to make a new certificate (whose new fingerprint the runs must pin)",
            dir.display()
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fingerprints_parse_in_the_forms_users_write() {
        let fp = fingerprint(b"abc");
        assert_eq!(fp.len(), 95);
        assert_eq!(parse_fingerprint(&fp).unwrap(), fp);
        let bare: String = fp.chars().filter(|c| *c != ':').collect();
        assert_eq!(
            parse_fingerprint(&format!("SHA256:{}", bare.to_uppercase())).unwrap(),
            fp
        );
        assert!(parse_fingerprint("abc").is_err());
        assert!(parse_fingerprint(&"zz".repeat(32)).is_err());
    }
}
