// Command livetest exercises the Go client against a running Sounding stack and prints one JSON
// object of what it saw; tests/integration/test_go_client.py runs it and checks the figures.
//
//	livetest -address 127.0.0.1:50051 -collection go-client
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"sort"
	"time"

	"google.golang.org/grpc"

	soundingv1 "sounding.dev/client/gen/sounding/v1"
	"sounding.dev/client/sounding"
)

type report struct {
	Ingested           int64    `json:"ingested"`
	EventsBeforeFinal  []string `json:"events_before_final"`
	TopHit             string   `json:"top_hit"`
	Recorded           int64    `json:"recorded"`
	CalibrateCode      string   `json:"calibrate_code"`
	CalibrateReason    string   `json:"calibrate_reason"`
	InvalidCode        string   `json:"invalid_code"`
	InvalidFields      []string `json:"invalid_fields"`
	RetrieveCancelCode string   `json:"retrieve_cancel_code"`
	AsksBeforeCancel   int      `json:"asks_before_cancel"`
	ResumedAfterCancel bool     `json:"resumed_after_cancel"`
	Answer             string   `json:"answer"`
	Stopping           string   `json:"stopping_reason"`
	// Tool routing: the route before and after the observer reported successful uses of
	// another tool.
	RouteBefore         string `json:"route_before"`
	RouteAfter          string `json:"route_after"`
	ObserverSent        int64  `json:"observer_sent"`
	ToolEventsProcessed int64  `json:"tool_events_processed"`
	// The observer's contract with a server that takes every call and never answers: the
	// Observe calls that returned, the batches sent or failed by the time they had all returned,
	// the slowest percentile (for information; speed is measured by benchmarks), the events a
	// full queue refused, and what was recorded, dropped or given up once closed.
	ObserveCalls          int     `json:"observe_calls"`
	SettledWhileObserving int64   `json:"silent_settled_while_observing"`
	ObserveP99Micros      float64 `json:"observe_p99_micros"`
	SilentDroppedOnFull   int64   `json:"silent_dropped_on_full"`
	SilentSent            int64   `json:"silent_sent"`
	SilentDropped         int64   `json:"silent_dropped_or_failed"`
}

// The observer's queue with the silent server, and how long one of its Observe calls may wait:
// longer than the test that runs this program waits for it, so an Observe or a Close that waited
// on the call would never let the program finish, however fast the machine.
const (
	silentQueueSize   = 1000
	silentCallTimeout = time.Hour
)

func main() {
	address := flag.String("address", "127.0.0.1:50051", "the orchestrator")
	collection := flag.String("collection", "go-client", "a collection this run creates and deletes")
	secret := flag.String("secret", "3910", "the bulls-and-cows secret the oracle answers for")
	rideOut := flag.Bool("ride-out", false, "only play a game whose server restarts while it waits: "+
		"at its second question, print \"waiting\" and read a line before answering")
	flag.Parse()
	if *rideOut {
		rideOutRestart(*address, *secret)
		return
	}
	// Generous: the stack may share its cores with other work; the test's timeout is longer.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	client, err := sounding.Dial(*address, sounding.Options{})
	check(err)
	defer client.Close()
	var out report

	_, err = client.CreateCollection(ctx, *collection, "made by the Go client's live test")
	check(err)
	defer client.DeleteCollection(context.Background(), *collection)
	documents := []*soundingv1.Document{
		{Id: "tide", Text: "Tides rise and fall twice a day under the pull of the moon."},
		{Id: "lead", Text: "A leadsman casts a weighted line to measure the depth of the water."},
		{Id: "chart", Text: "Nautical charts mark the depth of the sea in fathoms."},
	}
	ingested, err := client.Ingest(ctx, *collection, documents, 2)
	check(err)
	out.Ingested = ingested.TotalDocuments

	// A streamed Retrieve: events arrive before the Final.
	stream, err := client.Retrieve(ctx, &soundingv1.RetrieveRequest{Collection: *collection, Query: "how is the depth measured", TopK: 2})
	check(err)
	var final *soundingv1.Final
	for final == nil {
		event, err := stream.Recv()
		check(err)
		switch e := event.Event.(type) {
		case *soundingv1.RetrieveResponse_Final:
			final = e.Final
		case *soundingv1.RetrieveResponse_Plan:
			out.EventsBeforeFinal = append(out.EventsBeforeFinal, "plan")
		case *soundingv1.RetrieveResponse_StrategyResult:
			out.EventsBeforeFinal = append(out.EventsBeforeFinal, "strategy_result")
		case *soundingv1.RetrieveResponse_Fused:
			out.EventsBeforeFinal = append(out.EventsBeforeFinal, "fused")
		}
	}
	if _, err := stream.Recv(); err != io.EOF {
		fail("the Retrieve stream went on after its Final: %v", err)
	}
	out.TopHit = final.Hits[0].DocumentId

	observed, err := client.Observe(ctx, &soundingv1.ObserveRequest{Observation: &soundingv1.ObserveRequest_RetrievalOutcome{
		RetrievalOutcome: &soundingv1.RetrievalOutcome{RetrievalId: final.RetrievalId, UsedDocumentIds: []string{out.TopHit}},
	}})
	check(err)
	out.Recorded = observed.Recorded

	// Calibrate refuses to fit from too few recorded states, saying why.
	_, err = client.Calibrate(ctx, &soundingv1.CalibrateRequest{
		Target: soundingv1.CalibrationTarget_CALIBRATION_TARGET_STOP_THRESHOLD, Task: "dc", Regime: "collapse", StopRule: "mi_only",
	}, nil)
	refused := asSoundingError(err)
	out.CalibrateCode, out.CalibrateReason = refused.Code.String(), refused.Reason

	// A bad request names its field.
	_, err = client.CreateCollection(ctx, "Not A Name", "")
	invalid := asSoundingError(err)
	out.InvalidCode, out.InvalidFields = invalid.Code.String(), invalid.Fields()

	// Cancelling a Retrieve mid-stream ends it: one whose generating arm (hyde) takes seconds is
	// cancelled after its first event.
	retrieveCtx, cancelRetrieve := context.WithCancel(ctx)
	slow := &soundingv1.RetrieveRequest{Collection: *collection, Query: "tides", TopK: 2, Arms: []string{"dense", "hyde"}}
	stream, err = client.Retrieve(retrieveCtx, slow)
	check(err)
	_, err = stream.Recv()
	check(err)
	cancelRetrieve()
	for err == nil {
		_, err = stream.Recv()
	}
	if err == io.EOF {
		out.RetrieveCancelCode = "finished before the cancel"
	} else {
		out.RetrieveCancelCode = asSoundingError(err).Code.String()
	}

	// Bulls and cows: two questions, then the stream is cancelled mid-session. The server holds a
	// session for one stream at a time (SESSION_BUSY otherwise), so resuming it shows the server
	// saw the cancel; the resumed game is played to its answer.
	policy := &soundingv1.InquiryPolicy{QuestionSelection: "eig"}
	inquiry, err := client.Inquire(ctx, &soundingv1.InquiryStart{Domain: "bulls_and_cows", Policy: policy})
	check(err)
	for out.AsksBeforeCancel < 2 {
		event, err := inquiry.Recv()
		check(err)
		if ask := event.GetAsk(); ask != nil {
			out.AsksBeforeCancel++
			if out.AsksBeforeCancel < 2 {
				check(inquiry.Answer(feedback(*secret, ask.Question)))
			}
		}
	}
	inquiry.Close()
	resumed := resume(ctx, client, inquiry.SessionID())
	out.ResumedAfterCancel = true
	for {
		event, err := resumed.Recv()
		if err == io.EOF {
			break
		}
		check(err)
		if ask := event.GetAsk(); ask != nil {
			check(resumed.Answer(feedback(*secret, ask.Question)))
		}
		if answer := event.GetAnswer(); answer != nil {
			out.Answer, out.Stopping = answer.Answer, answer.StoppingReason.String()
		}
	}
	tools(ctx, client, *collection+"-tools", &out)
	silentObserver(&out)
	check(json.NewEncoder(os.Stdout).Encode(out))
}

// tools registers a toolset, routes a request, reports through the observer that another tool
// served such requests, waits for the learner and routes again.
func tools(ctx context.Context, client *sounding.Client, toolset string, out *report) {
	_, err := client.PutTools(ctx, toolset,
		&soundingv1.Tool{Name: "get_weather", Description: "Get the weather forecast (rain, temperature, wind) for a city."},
		&soundingv1.Tool{Name: "send_email", Description: "Send an email message to a recipient."},
		&soundingv1.Tool{Name: "search_web", Description: "Search the web for pages about a topic."},
	)
	check(err)
	request := "How many yen would I get for 250 dollars?"
	before, err := client.RouteTool(ctx, toolset, request, 3)
	check(err)
	out.RouteBefore = before.Top1
	// Its call timeout and Close's are generous: Close returns once the events are sent.
	observer := sounding.NewToolUseObserver(client, sounding.ObserverOptions{FlushInterval: 20 * time.Millisecond, CallTimeout: 2 * time.Minute})
	success := true
	for i := 0; i < 4; i++ {
		observer.Observe(toolset, fmt.Sprintf("How many yen do I get for 100 dollars? (%d)", i), "search_web", nil, &success)
	}
	observer.Close(5 * time.Minute)
	out.ObserverSent = observer.Sent.Load()
	deadline := time.Now().Add(5 * time.Minute) // waits for the event; this is not a speed target
	for {
		metrics, err := client.ToolMetrics(ctx, toolset)
		check(err)
		out.ToolEventsProcessed = metrics.Processed
		if metrics.Processed >= 4 || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	after, err := client.RouteTool(ctx, toolset, request, 3)
	check(err)
	out.RouteAfter = after.Top1
}

// silentObserver makes 10,000 Observe calls with an observer whose server takes every call and
// holds it unanswered, then closes it within 200 ms. Observe only queues (the spec's non-blocking
// hand-off), so every call returns while the first batch is still held, and Close cancels that
// batch rather than waiting out the call timeout.
func silentObserver(out *report) {
	listener, err := net.Listen("tcp", "127.0.0.1:0")
	check(err)
	holding := grpc.NewServer(grpc.UnknownServiceHandler(func(_ any, stream grpc.ServerStream) error {
		<-stream.Context().Done()
		return stream.Context().Err()
	}))
	go func() { _ = holding.Serve(listener) }()
	defer holding.Stop()
	client, err := sounding.Dial(listener.Addr().String(), sounding.Options{})
	check(err)
	defer client.Close()
	observer := sounding.NewToolUseObserver(client, sounding.ObserverOptions{QueueSize: silentQueueSize, CallTimeout: silentCallTimeout})
	took := make([]time.Duration, 10000)
	for i := range took {
		called := time.Now()
		observer.Observe("tools", "request", "shell", nil, nil)
		took[i] = time.Since(called)
		out.ObserveCalls++
	}
	out.SettledWhileObserving = observer.Sent.Load() + observer.Failed.Load()
	out.SilentDroppedOnFull = observer.Dropped.Load()
	sort.Slice(took, func(i, j int) bool { return took[i] < took[j] })
	out.ObserveP99Micros = float64(took[len(took)*99/100]) / float64(time.Microsecond)
	observer.Close(200 * time.Millisecond)
	out.SilentSent = observer.Sent.Load()
	out.SilentDropped = observer.Dropped.Load() + observer.Failed.Load()
}

// rideOutRestart plays a game, waiting at its second question for a line on stdin (the test
// restarts the server meanwhile), and prints the turns asked, the answer and the resumes.
func rideOutRestart(address, secret string) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	client, err := sounding.Dial(address, sounding.Options{})
	check(err)
	defer client.Close()
	policy := &soundingv1.InquiryPolicy{QuestionSelection: "eig"}
	inquiry, err := client.Inquire(ctx, &soundingv1.InquiryStart{Domain: "bulls_and_cows", Policy: policy})
	check(err)
	inquiry.ResumeWithin = 5 * time.Minute // generous: the server restarts however busy the machine
	seen := struct {
		Turns   []int32 `json:"turns"`
		Answer  string  `json:"answer"`
		Resumes int     `json:"resumes"`
	}{}
	for {
		event, err := inquiry.Recv()
		if err == io.EOF {
			break
		}
		check(err)
		if ask := event.GetAsk(); ask != nil {
			seen.Turns = append(seen.Turns, ask.Turn)
			if len(seen.Turns) == 2 {
				fmt.Println("waiting")
				_, err := fmt.Scanln()
				check(err)
			}
			check(inquiry.Answer(feedback(secret, ask.Question)))
		}
		if answer := event.GetAnswer(); answer != nil {
			seen.Answer = answer.Answer
		}
	}
	seen.Resumes = inquiry.Resumes
	check(json.NewEncoder(os.Stdout).Encode(seen))
}

// resume retries while the server still holds the session for the cancelled stream (for up to
// a minute: it waits for the server to see the cancel, however busy the machine).
func resume(ctx context.Context, client *sounding.Client, sessionID string) *sounding.Inquiry {
	deadline := time.Now().Add(time.Minute)
	for {
		inquiry, err := client.ResumeInquiry(ctx, sessionID)
		check(err)
		event, err := inquiry.Recv()
		if err == nil && event.GetBelief() != nil {
			return inquiry
		}
		busy := asSoundingError(err)
		if busy.Reason != "SESSION_BUSY" || time.Now().After(deadline) {
			fail("resuming after the cancel: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// feedback answers a guess about secret as "BULLS COWS".
func feedback(secret, guess string) string {
	bulls, cows := 0, 0
	for i := range guess {
		for j := range secret {
			if guess[i] == secret[j] {
				if i == j {
					bulls++
				} else {
					cows++
				}
			}
		}
	}
	return fmt.Sprintf("%d %d", bulls, cows)
}

func asSoundingError(err error) *sounding.Error {
	var failure *sounding.Error
	if !errors.As(err, &failure) {
		fail("expected a Sounding error, got %v", err)
	}
	return failure
}

func check(err error) {
	if err != nil {
		fail("%v", err)
	}
}

func fail(format string, args ...interface{}) {
	fmt.Fprintf(os.Stderr, "livetest: "+format+"\n", args...)
	os.Exit(1)
}
