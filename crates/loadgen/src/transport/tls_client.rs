//! The run's one rustls client configuration, built from the plan's [`TlsOptions`]: the
//! plan checks it (the files it names are read, and found wanting, before anything is sent)
//! and the tokio engine's connections share it (`engine::tls` does the handshakes).

use std::sync::Arc;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::Resumption;
use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
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
        builder.with_root_certificates(roots)
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
