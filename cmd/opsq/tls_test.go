package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"opsq/api/wire"
	"opsq/client"
	"opsq/cmd/opsq/clustertest"
	"opsq/sql/pgtest"
)

// testCA makes a CA and a certificate it signs for 127.0.0.1, and writes them as PEM
// files in dir: ca.pem, cert.pem and key.pem. It returns the CA's pool.
func testCA(t *testing.T, dir string) *x509.CertPool {
	t.Helper()
	newKey := func() *ecdsa.PrivateKey {
		k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	writePEM := func(name, typ string, der []byte) {
		if err := os.WriteFile(filepath.Join(dir, name), pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	now := time.Now()
	caKey := newKey()
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "opsq test CA"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		t.Fatal(err)
	}
	leafKey := newKey()
	leafTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "opsq instance"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, DNSNames: []string{"localhost"},
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	leafDER, err := x509.CreateCertificate(rand.Reader, leafTmpl, ca, &leafKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(leafKey)
	if err != nil {
		t.Fatal(err)
	}
	writePEM("ca.pem", "CERTIFICATE", caDER)
	writePEM("cert.pem", "CERTIFICATE", leafDER)
	writePEM("key.pem", "PRIVATE KEY", keyDER)
	pool := x509.NewCertPool()
	pool.AddCert(ca)
	return pool
}

// TestClusterTLS: two instances serve HTTPS with certificates from a CA the test makes,
// with API keys required, trust each other through OPSQ_TLS_CA, and forward a reserve and
// an extend to each other over it on the caller's key; a client that does not trust the
// CA is refused, and so are plain HTTP and a request without a key.
func TestClusterTLS(t *testing.T) {
	dir := t.TempDir()
	roots := testCA(t, dir)
	dbURL := pgtest.NewDB(t)
	consumerKey := createKey(t, dbURL, "tls-consumer", "consumer")
	c := clustertest.New(t, opsqBinary, dbURL)
	c.HTTP.Transport.(*http.Transport).TLSClientConfig = &tls.Config{RootCAs: roots}
	c.HTTPS = true
	c.Key = createKey(t, dbURL, "tls-admin", "admin")
	c.Env = append(c.Env, "OPSQ_AUTH=required", "OPSQ_TLS_CERT="+filepath.Join(dir, "cert.pem"), "OPSQ_TLS_KEY="+filepath.Join(dir, "key.pem"),
		"OPSQ_TLS_CA="+filepath.Join(dir, "ca.pem"))
	insts := c.StartN(2)
	a, b := insts[0], insts[1]
	ctx := t.Context()
	l := clustertest.NewLedger()
	if !strings.HasPrefix(a.URL, "https://") {
		t.Fatalf("instance URL %s; want https://", a.URL)
	}

	// Enough chunks that both instances' shards have some; a takes its own, then asks for
	// more, which only b can give: forwarded over HTTPS.
	clustertest.SubmitChunks(ctx, t, a.Client, l, 200)
	own := clustertest.ReserveHeld(ctx, t, a.Local, l, a.ID, 1000)
	if len(own) == 0 || len(own) == 200 {
		t.Fatalf("%s holds %d of 200 chunks on its own shards; want some, not all", a.ID, len(own))
	}
	consumer := client.New(a.URL, client.WithHTTPClient(c.HTTP), client.WithKey(consumerKey))
	forwarded, err := consumer.Reserve(ctx, wire.ReserveRequest{Max: 1000, Lease: "30s", Consumer: "tls"})
	if err != nil || len(forwarded) == 0 {
		t.Fatalf("reserve through %s once its own shards are empty: %d chunks, %v; want %s's, forwarded over HTTPS", a.ID, len(forwarded), err, b.ID)
	}
	for _, ch := range forwarded {
		l.Deliver(ch, a.URL, "tls")
	}
	// Extend b's reservation through a: forwarded to b, its owner.
	res, err := consumer.Extend(ctx, "1m", forwarded[0].Token)
	if err != nil || len(res) != 1 || res[0].Status != wire.StatusExtended {
		t.Fatalf("extend of %s's chunk through %s: %+v, %v; want extended", b.ID, a.ID, res, err)
	}

	// A client without the CA, plain HTTP, and a request without a key get nothing.
	if _, err := client.New(a.URL, client.WithHTTPClient(c.HTTP)).Reserve(ctx, wire.ReserveRequest{Max: 1}); err == nil ||
		!strings.Contains(err.Error(), "401") {
		t.Errorf("a reserve without a key over HTTPS: %v; want 401", err)
	}
	if resp, err := http.Get(a.URL + "/healthz"); err == nil {
		resp.Body.Close()
		t.Errorf("a client that does not trust the test CA reached %s (%s); want a certificate error", a.ID, resp.Status)
	}
	if resp, err := http.Get("http://" + strings.TrimPrefix(a.URL, "https://") + "/healthz"); err == nil {
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			t.Errorf("plain HTTP to %s's HTTPS port answered %s; want it refused", a.ID, resp.Status)
		}
	}
}

// TestServeRefusesHalfATLSConfiguration: a certificate without its key (or the other way
// round), an http:// advertise URL for an HTTPS instance, an https:// one for an instance
// without TLS, and unreadable files are refused
// at start, each naming what to set.
func TestServeRefusesHalfATLSConfiguration(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	testCA(t, dir)
	cert, key := filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--tls-cert", cert}, "OPSQ_TLS_KEY"},
		{[]string{"--tls-key", key}, "OPSQ_TLS_CERT"},
		{[]string{"--tls-cert", cert, "--tls-key", key, "--advertise-url", "http://127.0.0.1:3999"}, "https://"},
		{[]string{"--advertise-url", "https://127.0.0.1:3999"}, "OPSQ_TLS_CERT"}, // https:// without TLS
		{[]string{"--tls-cert", key, "--tls-key", cert}, "OPSQ_TLS_CERT"},
		{[]string{"--tls-cert", cert, "--tls-key", key, "--tls-ca", filepath.Join(dir, "nothing.pem")}, "OPSQ_TLS_CA"},
	} {
		var stderr strings.Builder
		args := append(tc.args, "--database-url", "postgres://nowhere.invalid/x", "--listen", "127.0.0.1:0")
		err := runServe(t.Context(), args, &stderr, &stderr)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("opsq serve %s: got %v; want an error naming %s", strings.Join(tc.args, " "), err, tc.want)
		}
	}
}

// TestTLSAcceptsOnlyAEADSuites: the server's configuration, as "opsq serve" builds it,
// refuses a TLS 1.2 client that offers only CBC suites (with SHA-1 or SHA-256), and
// accepts one that offers an AEAD suite, and TLS 1.3; the peers' configuration offers the
// same suites.
func TestTLSAcceptsOnlyAEADSuites(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	roots := testCA(t, dir)
	f := tlsFiles{cert: filepath.Join(dir, "cert.pem"), key: filepath.Join(dir, "key.pem"), ca: filepath.Join(dir, "ca.pem")}
	srvCfg, err := f.server()
	if err != nil {
		t.Fatal(err)
	}
	ln, err := tls.Listen("tcp", "127.0.0.1:0", srvCfg)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	done := make(chan struct{})
	defer func() { ln.Close(); <-done }()
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			_ = c.(*tls.Conn).Handshake() // the client's side tells
			c.Close()
		}
	}()
	peerCfg, err := f.peers()
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		cfg    *tls.Config
		wantOK bool
	}{
		{"TLS 1.2 ECDHE-ECDSA-AES128-CBC-SHA", &tls.Config{MaxVersion: tls.VersionTLS12, CipherSuites: []uint16{tls.TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA}}, false},
		{"TLS 1.2 ECDHE-ECDSA-AES256-CBC-SHA", &tls.Config{MaxVersion: tls.VersionTLS12, CipherSuites: []uint16{tls.TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA}}, false},
		{"TLS 1.2 ECDHE-ECDSA-AES128-CBC-SHA256", &tls.Config{MaxVersion: tls.VersionTLS12, CipherSuites: []uint16{tls.TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA256}}, false},
		{"TLS 1.1", &tls.Config{MaxVersion: tls.VersionTLS11}, false},
		{"TLS 1.2 ECDHE-ECDSA-AES128-GCM", &tls.Config{MaxVersion: tls.VersionTLS12, CipherSuites: []uint16{tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256}}, true},
		{"TLS 1.2 ECDHE-ECDSA-CHACHA20", &tls.Config{MaxVersion: tls.VersionTLS12, CipherSuites: []uint16{tls.TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256}}, true},
		{"TLS 1.3", &tls.Config{MinVersion: tls.VersionTLS13}, true},
		{"the peers' configuration at TLS 1.2", func() *tls.Config { c := peerCfg.Clone(); c.MaxVersion = tls.VersionTLS12; return c }(), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := tc.cfg.Clone()
			cfg.RootCAs, cfg.ServerName = roots, "127.0.0.1"
			d := &net.Dialer{Timeout: 30 * time.Second}
			c, err := tls.DialWithDialer(d, "tcp", ln.Addr().String(), cfg)
			if err == nil {
				c.Close()
			}
			if (err == nil) != tc.wantOK {
				t.Errorf("handshake: %v; want ok %v", err, tc.wantOK)
			}
		})
	}
	for _, s := range peerCfg.CipherSuites {
		if suite := tls.CipherSuiteName(s); !strings.Contains(suite, "GCM") && !strings.Contains(suite, "CHACHA20") {
			t.Errorf("the peers' configuration offers %s; want AEAD suites only", suite)
		}
	}
}
