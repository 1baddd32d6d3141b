module sounding.dev/client

go 1.19

// The versions this client is built and tested with (Debian bookworm's packages, GOPATH mode:
// see the Makefile's go-client target). With a module proxy, `go mod tidy` adds genproto.
require (
	google.golang.org/grpc v1.33.3
	google.golang.org/protobuf v1.28.1
)
