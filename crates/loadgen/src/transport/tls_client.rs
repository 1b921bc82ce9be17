//! The run's one rustls client configuration, built from the plan's [`TlsOptions`]: the
//! plan checks it (the files it names are read, and found wanting, before anything is sent)
//! and the tokio engine's connections share it (`engine::tls` does the handshakes).

use std::sync::Arc;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::{verify_server_name, Resumption, WebPkiServerVerifier};
use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::server::ParsedCertificate;
use rustls::{ClientConfig, DigitallySignedStruct, RootCertStore, SignatureScheme};

use crate::error::Error;
use crate::transport::TlsOptions;

/// ALPN for HTTP/1.1.
pub(crate) const ALPN_HTTP1: &[u8] = b"http/1.1";
/// ALPN for HTTP/2 (`--http2` over https).
pub(crate) const ALPN_H2: &[u8] = b"h2";

/// The run's TLS client: one configuration (and so one session cache, shared by every
/// connection of every worker: a reconnect resumes whichever session was stored last) and
/// the server's name.
#[derive(Clone)]
pub(crate) struct TlsClient {
    pub config: Arc<ClientConfig>,
    pub name: ServerName<'static>,
}

impl std::fmt::Debug for TlsClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TlsClient")
            .field("name", &self.name)
            .finish()
    }
}

fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// Builds the run's client configuration, reading the files `options` names; an error
/// names the file and the flag.
pub(crate) fn client(options: &TlsOptions, alpn: &[&[u8]]) -> Result<TlsClient, Error> {
    let invalid = |m: String| Error::InvalidPlan(m);
    let provider = provider();
    let builder = ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(|e| invalid(format!("TLS: {e}")))?;
    let builder = if options.insecure {
        builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(AcceptAny(provider)))
    } else {
        let mut roots = RootCertStore::empty();
        let mut pinned = Vec::new();
        match &options.cacert {
            Some(path) => {
                let shown = path.display();
                let certs = CertificateDer::pem_file_iter(path)
                    .map_err(|e| invalid(format!("cannot read CA file {shown}: {e} (--cacert)")))?
                    .collect::<Result<Vec<_>, _>>()
                    .map_err(|e| invalid(format!("CA file {shown} is not PEM: {e} (--cacert)")))?;
                if certs.is_empty() {
                    return Err(invalid(format!(
                        "CA file {shown} holds no certificate (--cacert wants PEM 'BEGIN CERTIFICATE' blocks)"
                    )));
                }
                pinned.clone_from(&certs);
                for cert in certs {
                    roots.add(cert).map_err(|e| {
                        invalid(format!(
                            "CA file {shown}: a certificate cannot be used: {e} (--cacert)"
                        ))
                    })?;
                }
            }
            None => roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned()),
        }
        let webpki = WebPkiServerVerifier::builder_with_provider(Arc::new(roots), provider.clone())
            .build()
            .map_err(|e| invalid(format!("TLS: {e}")))?;
        builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(TrustedOrPinned { webpki, pinned }))
    };
    let mut config = match (&options.cert, &options.key) {
        (None, None) => builder.with_no_client_auth(),
        (Some(cert), Some(key)) => {
            let certs = CertificateDer::pem_file_iter(cert)
                .map_err(|e| invalid(format!("cannot read {}: {e} (--cert)", cert.display())))?
                .collect::<Result<Vec<_>, _>>()
                .map_err(|e| invalid(format!("{} is not PEM: {e} (--cert)", cert.display())))?;
            if certs.is_empty() {
                return Err(invalid(format!(
                    "{} holds no certificate (--cert wants PEM)",
                    cert.display()
                )));
            }
            let key_der = PrivateKeyDer::from_pem_file(key).map_err(|e| {
                invalid(format!(
                    "cannot read a private key from {}: {e} (--key)",
                    key.display()
                ))
            })?;
            builder.with_client_auth_cert(certs, key_der).map_err(|e| {
                invalid(format!(
                    "--cert and --key do not make a client certificate: {e}"
                ))
            })?
        }
        (Some(_), None) => return Err(invalid("--cert needs --key".into())),
        (None, Some(_)) => return Err(invalid("--key needs --cert".into())),
    };
    config.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
    if !options.resume {
        config.resumption = Resumption::disabled();
    }
    let host = options
        .server_name
        .trim_start_matches('[')
        .trim_end_matches(']')
        .to_string();
    let name = ServerName::try_from(host).map_err(|e| {
        invalid(format!(
            "{:?} cannot be a TLS server name: {e}",
            options.server_name
        ))
    })?;
    Ok(TlsClient {
        config: Arc::new(config),
        name,
    })
}

/// The usual check against the trusted roots, and one exception curl (OpenSSL) makes too: a
/// self-signed certificate given in `--cacert` is accepted as the server's own although it
/// is a CA (`openssl req -x509` sets CA:TRUE), when the server presents exactly that
/// certificate. webpki refuses a CA as an end entity only after it checked the certificate's
/// validity period, and the host name is checked here, so only the chain is skipped: the
/// certificate *is* the trusted one, byte for byte.
#[derive(Debug)]
struct TrustedOrPinned {
    webpki: Arc<WebPkiServerVerifier>,
    /// The certificates of `--cacert`.
    pinned: Vec<CertificateDer<'static>>,
}

impl ServerCertVerifier for TrustedOrPinned {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        let refused =
            match self
                .webpki
                .verify_server_cert(end_entity, intermediates, server_name, ocsp, now)
            {
                Ok(verified) => return Ok(verified),
                Err(e) => e,
            };
        let ca_as_own =
            matches!(&refused, rustls::Error::InvalidCertificate(e) if is_ca_used_as_end_entity(e));
        if ca_as_own
            && self
                .pinned
                .iter()
                .any(|p| p.as_ref() == end_entity.as_ref())
        {
            verify_server_name(&ParsedCertificate::try_from(end_entity)?, server_name)?;
            return Ok(ServerCertVerified::assertion());
        }
        Err(refused)
    }

    // The handshake's signatures are checked as webpki checks them: only the chain differs.
    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.webpki.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.webpki.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.webpki.supported_verify_schemes()
    }
}

/// Whether webpki refused a certificate for being a CA presented as the server's own (its
/// error is not public through rustls: only its debug text names it).
pub(crate) fn is_ca_used_as_end_entity(e: &rustls::CertificateError) -> bool {
    matches!(e, rustls::CertificateError::Other(o) if format!("{o:?}").contains("CaUsedAsEndEntity"))
}

/// `--insecure`: every certificate is accepted, but the handshake's signatures are still
/// checked against the certificate presented (so the session keys are the server's).
#[derive(Debug)]
struct AcceptAny(Arc<CryptoProvider>);

impl ServerCertVerifier for AcceptAny {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

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
            &self.0.signature_verification_algorithms,
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
            &self.0.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}
