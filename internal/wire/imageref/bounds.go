package imageref

// MaxImageString bounds an image string the manager reads from objects it
// does not own (the images of pods and workload templates): Kubernetes
// puts no limit on a container's image, so a tenant can give one of a
// megabyte. Longer strings are dropped, with a counted warning.
//
// Dropping one protects nothing less. The reference grammar bounds a
// repository path to 255 characters, a tag to 128, a digest to its
// algorithm and hex (sha512: 7 + 128); the registry host is a DNS name of
// at most 253 (and a port). With the scheme a runtime puts before an image
// ID ("docker-pullable://"), a reference that can be pulled is at most
// about 800 bytes. A longer string is either no reference at all (Parse
// and the grammar refuse it: the kubelet never runs it, no node holds an
// image by that name) or one whose host no resolver accepts, which no
// runtime pulls: at most an image imported under that name, which has no
// repository digest and which keep-not-repullable keeps in any case.
// 4 KiB leaves room for anything a runtime reports.
const MaxImageString = 4096
