// The release's signing key: cosign's key file, read without cosign.

package release

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"os"

	"golang.org/x/crypto/nacl/secretbox"
	"golang.org/x/crypto/scrypt"
)

// Signer signs a release's artifacts with an ECDSA key, as cosign signs
// with a key pair from cosign generate-key-pair.
type Signer struct {
	key *ecdsa.PrivateKey
}

// PEM block types of cosign's encrypted private keys (older cosign wrote
// the second).
const (
	pemSigstoreKey = "ENCRYPTED SIGSTORE PRIVATE KEY"
	pemCosignKey   = "ENCRYPTED COSIGN PRIVATE KEY"
)

// encryptedKey is the JSON inside an encrypted key's PEM block: the
// private key's PKCS #8 DER, sealed with NaCl secretbox under a key
// derived from the password with scrypt.
type encryptedKey struct {
	KDF struct {
		Name   string `json:"name"`
		Params struct {
			N int `json:"N"`
			R int `json:"r"`
			P int `json:"p"`
		} `json:"params"`
		Salt []byte `json:"salt"`
	} `json:"kdf"`
	Cipher struct {
		Name  string `json:"name"`
		Nonce []byte `json:"nonce"`
	} `json:"cipher"`
	Ciphertext []byte `json:"ciphertext"`
}

// LoadSigner reads a cosign private key file (cosign generate-key-pair)
// with its password, or an unencrypted PKCS #8 PEM ECDSA key.
func LoadSigner(file string, password []byte) (*Signer, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("the signing key: %w", err)
	}
	block, _ := pem.Decode(data)
	if block == nil {
		return nil, fmt.Errorf("the signing key %s holds no PEM block", file)
	}
	der := block.Bytes
	switch block.Type {
	case pemSigstoreKey, pemCosignKey:
		if der, err = decryptKey(block.Bytes, password); err != nil {
			return nil, fmt.Errorf("the signing key %s: %w", file, err)
		}
	case "PRIVATE KEY":
	default:
		return nil, fmt.Errorf("the signing key %s is a %q, want cosign's %q", file, block.Type, pemSigstoreKey)
	}
	k, err := x509.ParsePKCS8PrivateKey(der)
	if err != nil {
		return nil, fmt.Errorf("the signing key %s: %w", file, err)
	}
	ec, ok := k.(*ecdsa.PrivateKey)
	if !ok {
		return nil, fmt.Errorf("the signing key %s is a %T, want an ECDSA key (cosign generate-key-pair)", file, k)
	}
	return &Signer{key: ec}, nil
}

func decryptKey(sealed, password []byte) ([]byte, error) {
	var ek encryptedKey
	if err := json.Unmarshal(sealed, &ek); err != nil {
		return nil, fmt.Errorf("not cosign's encrypted key format: %w", err)
	}
	if ek.KDF.Name != "scrypt" || ek.Cipher.Name != "nacl/secretbox" || len(ek.Cipher.Nonce) != 24 {
		return nil, fmt.Errorf("key sealed with %s and %s, want scrypt and nacl/secretbox", ek.KDF.Name, ek.Cipher.Name)
	}
	k, err := scrypt.Key(password, ek.KDF.Salt, ek.KDF.Params.N, ek.KDF.Params.R, ek.KDF.Params.P, 32)
	if err != nil {
		return nil, err
	}
	var key [32]byte
	var nonce [24]byte
	copy(key[:], k)
	copy(nonce[:], ek.Cipher.Nonce)
	out, ok := secretbox.Open(nil, ek.Ciphertext, &nonce, &key)
	if !ok {
		return nil, errors.New("wrong password (COSIGN_PASSWORD)")
	}
	return out, nil
}

// Sign is the ASN.1 ECDSA signature of SHA-256(data), as cosign makes.
func (s *Signer) Sign(data []byte) ([]byte, error) {
	sum := sha256.Sum256(data)
	return s.key.Sign(rand.Reader, sum[:], crypto.SHA256)
}

// Verify says whether sig is this key's signature of data.
func (s *Signer) Verify(data, sig []byte) bool {
	sum := sha256.Sum256(data)
	return ecdsa.VerifyASN1(&s.key.PublicKey, sum[:], sig)
}

// PublicKeyPEM is the public key as cosign.pub holds it.
func (s *Signer) PublicKeyPEM() ([]byte, error) {
	der, err := x509.MarshalPKIXPublicKey(&s.key.PublicKey)
	if err != nil {
		return nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}), nil
}
