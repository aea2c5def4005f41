package main

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
)

// TLS (DESIGN.md §8): with OPSQ_TLS_CERT and OPSQ_TLS_KEY an instance serves HTTPS, and
// OPSQ_TLS_CA is the CA it trusts when it calls another instance (the system's roots
// without it). opsq speaks HTTP/1.1 over TLS too, not HTTP/2: a parked reserve takes its
// connection over (api/park.go), which HTTP/2 does not allow.

// tlsFiles are the TLS files of "opsq serve".
type tlsFiles struct {
	cert, key, ca string
}

// on reports whether the instance serves HTTPS.
func (f tlsFiles) on() bool { return f.cert != "" }

// check refuses half a configuration, and an advertise URL the other instances could not
// use with it.
func (f tlsFiles) check(advertiseURL string) error {
	switch {
	case (f.cert == "") != (f.key == ""):
		return errors.New("--tls-cert (OPSQ_TLS_CERT) and --tls-key (OPSQ_TLS_KEY) go together: set both to serve HTTPS, or neither")
	}
	u, err := url.Parse(advertiseURL)
	switch {
	case err != nil:
		return nil // checkAdvertiseURL says what is wrong with it
	case f.on() && u.Scheme != "https":
		return fmt.Errorf("advertise URL %q (--advertise-url, OPSQ_ADVERTISE_URL): this instance serves HTTPS, so other instances must reach it at an https:// URL", advertiseURL)
	case !f.on() && u.Scheme == "https":
		return fmt.Errorf("advertise URL %q (--advertise-url, OPSQ_ADVERTISE_URL): https:// but this instance serves plain HTTP; set --tls-cert and --tls-key (OPSQ_TLS_CERT, OPSQ_TLS_KEY) to serve HTTPS, or advertise an http:// URL", advertiseURL)
	}
	return nil
}

// cipherSuites are the TLS 1.2 suites an instance accepts and offers: ECDHE key exchange
// and AEAD ciphers only, none of the CBC (SHA-1 or SHA-256) suites Go still enables by
// default. TLS 1.3 has only AEAD suites, and Go does not let them be configured.
var cipherSuites = []uint16{
	tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256,
	tls.TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,
	tls.TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384,
	tls.TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384,
	tls.TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256,
	tls.TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256,
}

// baseTLS is the TLS configuration every connection of an instance starts from: TLS 1.2
// with AEAD suites only, or 1.3.
func baseTLS() *tls.Config {
	return &tls.Config{MinVersion: tls.VersionTLS12, CipherSuites: cipherSuites}
}

// server returns the server's TLS configuration, nil when it serves plain HTTP.
func (f tlsFiles) server() (*tls.Config, error) {
	if !f.on() {
		return nil, nil
	}
	cert, err := tls.LoadX509KeyPair(f.cert, f.key)
	if err != nil {
		return nil, fmt.Errorf("loading the TLS certificate %s and key %s (OPSQ_TLS_CERT, OPSQ_TLS_KEY; PEM files, the key unencrypted): %w", f.cert, f.key, err)
	}
	c := baseTLS()
	c.Certificates = []tls.Certificate{cert}
	return c, nil
}

// peers returns the TLS configuration of the calls to other instances: the suites of
// baseTLS, trusting the CA of OPSQ_TLS_CA, or the system's roots without it.
func (f tlsFiles) peers() (*tls.Config, error) {
	if f.ca == "" {
		return baseTLS(), nil
	}
	pem, err := os.ReadFile(f.ca)
	if err != nil {
		return nil, fmt.Errorf("reading the CA of the instances (OPSQ_TLS_CA): %w", err)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("the CA of the instances %s (OPSQ_TLS_CA) holds no PEM certificate", f.ca)
	}
	c := baseTLS()
	c.RootCAs = roots
	return c, nil
}

// serveHTTP1Only keeps srv from offering HTTP/2 over TLS.
func serveHTTP1Only(srv *http.Server) {
	srv.TLSNextProto = map[string]func(*http.Server, *tls.Conn, http.Handler){}
}
