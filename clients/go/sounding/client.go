// Package sounding is the Go client of Sounding: retrieval with an account of what it may have
// missed, ask-or-answer inquiries, outcome reports and calibration, over gRPC.
//
// Requests and events are the generated sounding.v1 messages (package soundingv1); this package
// adds the connection (TLS, bearer token), streams as readers, inquiry sessions, and errors that
// carry the status details (*Error).
package sounding

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"os"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	soundingv1 "sounding.dev/client/gen/sounding/v1"
)

// Options of a connection. A token is sent as `authorization: Bearer <token>` on every call,
// and only over TLS or to a loopback address.
type Options struct {
	Token string
	// CAFile turns TLS on, verifying the server against this PEM bundle.
	CAFile string
	// CertFile and KeyFile: a client certificate, for servers that require mutual TLS.
	CertFile, KeyFile string
	// RoundRobin spreads calls over every address the target resolves to (a Kubernetes headless
	// Service's dns:/// name gives one per orchestrator). Not the default: while its one address
	// is down, a round-robin connection fails calls at once.
	RoundRobin bool
}

// Client holds one connection; its methods are safe for concurrent use.
type Client struct {
	conn     *grpc.ClientConn
	sounding soundingv1.SoundingServiceClient
	corpus   soundingv1.CorpusServiceClient
	tools    soundingv1.ToolServiceClient
}

// serviceConfig (with Options.RoundRobin's balancing in place of %s) retries the reads when the
// server is unavailable (draining, restarting: the next attempt may reach another orchestrator)
// before it answered; no other call is retried, since it may have taken effect. A Retrieve
// changes nothing but its own record. grpc-go before 1.40 retries only with the environment
// variable GRPC_GO_RETRY=on.
const serviceConfig = `{%s
  "methodConfig": [{
    "name": [
      {"service": "sounding.v1.CorpusService", "method": "GetCollection"},
      {"service": "sounding.v1.CorpusService", "method": "ListCollections"},
      {"service": "sounding.v1.SoundingService", "method": "Retrieve"},
      {"service": "sounding.v1.SoundingService", "method": "GetStrategyMetrics"},
      {"service": "sounding.v1.ToolService", "method": "ListTools"},
      {"service": "sounding.v1.ToolService", "method": "RouteTool"},
      {"service": "sounding.v1.ToolService", "method": "GetToolMetrics"}
    ],
    "retryPolicy": {
      "maxAttempts": 4,
      "initialBackoff": "0.2s",
      "maxBackoff": "2s",
      "backoffMultiplier": 2,
      "retryableStatusCodes": ["UNAVAILABLE"]
    }
  }]
}`

// Dial connects to a Sounding server at address ("host:port", or a gRPC target such as
// "dns:///sounding-headless.sounding.svc.cluster.local:50051"). The connection is made lazily.
func Dial(address string, options Options) (*Client, error) {
	dialOptions := []grpc.DialOption{
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(64 << 20)),
	}
	balancing := ""
	if options.RoundRobin {
		balancing = `
  "loadBalancingConfig": [{"round_robin": {}}],`
	}
	dialOptions = append(dialOptions, grpc.WithDefaultServiceConfig(fmt.Sprintf(serviceConfig, balancing)))
	secure := options.CAFile != ""
	if secure {
		config, err := tlsConfig(options)
		if err != nil {
			return nil, err
		}
		dialOptions = append(dialOptions, grpc.WithTransportCredentials(credentials.NewTLS(config)))
	} else {
		if options.CertFile != "" || options.KeyFile != "" {
			return nil, fmt.Errorf("a client certificate needs TLS: set CAFile too")
		}
		dialOptions = append(dialOptions, grpc.WithInsecure())
	}
	if options.Token != "" {
		if !secure && !isLoopback(address) {
			return nil, fmt.Errorf("refusing to send a token in plaintext to %s: set CAFile for TLS", address)
		}
		dialOptions = append(dialOptions, grpc.WithPerRPCCredentials(bearer{options.Token, secure}))
	}
	conn, err := grpc.Dial(address, dialOptions...)
	if err != nil {
		return nil, err
	}
	return &Client{
		conn,
		soundingv1.NewSoundingServiceClient(conn),
		soundingv1.NewCorpusServiceClient(conn),
		soundingv1.NewToolServiceClient(conn),
	}, nil
}

// Close ends the connection (and every call still running on it).
func (c *Client) Close() error { return c.conn.Close() }

func tlsConfig(options Options) (*tls.Config, error) {
	pem, err := os.ReadFile(options.CAFile)
	if err != nil {
		return nil, err
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("%s holds no PEM certificate", options.CAFile)
	}
	config := &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}
	if options.CertFile != "" || options.KeyFile != "" {
		pair, err := tls.LoadX509KeyPair(options.CertFile, options.KeyFile)
		if err != nil {
			return nil, err
		}
		config.Certificates = []tls.Certificate{pair}
	}
	return config, nil
}

func isLoopback(address string) bool {
	host, _, err := net.SplitHostPort(address)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

type bearer struct {
	token  string
	secure bool
}

func (b bearer) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	return map[string]string{"authorization": "Bearer " + b.token}, nil
}

func (b bearer) RequireTransportSecurity() bool { return b.secure }

// CreateCollection makes an empty collection.
func (c *Client) CreateCollection(ctx context.Context, name, description string) (*soundingv1.Collection, error) {
	response, err := c.corpus.CreateCollection(ctx, &soundingv1.CreateCollectionRequest{Name: name, Description: description})
	if err != nil {
		return nil, asError(err)
	}
	return response.Collection, nil
}

// GetCollection describes a collection (its counts included).
func (c *Client) GetCollection(ctx context.Context, name string) (*soundingv1.Collection, error) {
	response, err := c.corpus.GetCollection(ctx, &soundingv1.GetCollectionRequest{Name: name})
	if err != nil {
		return nil, asError(err)
	}
	return response.Collection, nil
}

// ListCollections returns every collection, reading all pages.
func (c *Client) ListCollections(ctx context.Context) ([]*soundingv1.Collection, error) {
	var all []*soundingv1.Collection
	token := ""
	for {
		response, err := c.corpus.ListCollections(ctx, &soundingv1.ListCollectionsRequest{PageToken: token})
		if err != nil {
			return nil, asError(err)
		}
		all = append(all, response.Collections...)
		if token = response.NextPageToken; token == "" {
			return all, nil
		}
	}
}

// DeleteCollection removes a collection and everything in it.
func (c *Client) DeleteCollection(ctx context.Context, name string) error {
	_, err := c.corpus.DeleteCollection(ctx, &soundingv1.DeleteCollectionRequest{Name: name})
	return asError(err)
}

// Ingest streams documents in batches of batchSize and returns the last acknowledgement: when it
// returns without error, every document is durably written.
func (c *Client) Ingest(ctx context.Context, collection string, documents []*soundingv1.Document, batchSize int) (*soundingv1.IngestDocumentsResponse, error) {
	if batchSize <= 0 {
		batchSize = 64
	}
	stream, err := c.corpus.IngestDocuments(ctx)
	if err != nil {
		return nil, asError(err)
	}
	sent := make(chan error, 1)
	go func() {
		for start := 0; start < len(documents); start += batchSize {
			end := start + batchSize
			if end > len(documents) {
				end = len(documents)
			}
			request := &soundingv1.IngestDocumentsRequest{Collection: collection, Documents: documents[start:end]}
			if err := stream.Send(request); err != nil {
				sent <- err
				return
			}
		}
		sent <- stream.CloseSend()
	}()
	var last *soundingv1.IngestDocumentsResponse
	for {
		response, err := stream.Recv()
		if err == io.EOF {
			break
		}
		if err != nil {
			return last, asError(err)
		}
		last = response
	}
	if err := <-sent; err != nil && err != io.EOF {
		return last, asError(err)
	}
	return last, nil
}

// RetrieveStream reads a Retrieve's events as they arrive: Plan, StrategyResult and Fused
// events, then Final. Recv returns io.EOF after the last; cancelling the call's context cancels
// the retrieval on the server.
type RetrieveStream struct {
	stream soundingv1.SoundingService_RetrieveClient
}

// Recv returns the next event, io.EOF at the end, or an *Error.
func (s *RetrieveStream) Recv() (*soundingv1.RetrieveResponse, error) {
	event, err := s.stream.Recv()
	if err == io.EOF {
		return nil, err
	}
	return event, asError(err)
}

// Retrieve starts a retrieval; read its events from the stream.
func (c *Client) Retrieve(ctx context.Context, request *soundingv1.RetrieveRequest) (*RetrieveStream, error) {
	stream, err := c.sounding.Retrieve(ctx, request)
	if err != nil {
		return nil, asError(err)
	}
	return &RetrieveStream{stream}, nil
}

// Observe reports outcomes of earlier retrievals and inquiries. The response counts those
// recorded (durably) and lists the others with a reason.
func (c *Client) Observe(ctx context.Context, observations ...*soundingv1.ObserveRequest) (*soundingv1.ObserveResponse, error) {
	stream, err := c.sounding.Observe(ctx)
	if err != nil {
		return nil, asError(err)
	}
	for _, observation := range observations {
		if err := stream.Send(observation); err != nil && err != io.EOF {
			return nil, asError(err)
		}
	}
	response, err := stream.CloseAndRecv()
	return response, asError(err)
}

// Calibrate fits a calibration target; progress (if not nil) sees each progress event, and the
// report is returned.
func (c *Client) Calibrate(ctx context.Context, request *soundingv1.CalibrateRequest, progress func(*soundingv1.CalibrationProgress)) (*soundingv1.CalibrationReport, error) {
	stream, err := c.sounding.Calibrate(ctx, request)
	if err != nil {
		return nil, asError(err)
	}
	for {
		event, err := stream.Recv()
		if err == io.EOF {
			return nil, fmt.Errorf("the Calibrate stream ended without a report")
		}
		if err != nil {
			return nil, asError(err)
		}
		if report := event.GetReport(); report != nil {
			return report, nil
		}
		if progress != nil {
			progress(event.GetProgress())
		}
	}
}

// StrategyMetrics reports how the strategy selector has behaved, per arm and overall.
func (c *Client) StrategyMetrics(ctx context.Context) (*soundingv1.GetStrategyMetricsResponse, error) {
	response, err := c.sounding.GetStrategyMetrics(ctx, &soundingv1.GetStrategyMetricsRequest{})
	return response, asError(err)
}
