// upstream-diff runs the upstream descheduler (sigs.k8s.io/descheduler v0.36.0) on a cluster
// snapshot, so desched's decisions can be compared with upstream's own code
// (tests/differential, docs/conformance.md "The upstream differential tier").
//
//	upstream-diff --policy POLICY --snapshot SNAPSHOT --now RFC3339 [--runs N] [--parallel P]
//
// For each run it builds a client-go fake clientset holding the snapshot's objects, loads the
// policy with upstream's LoadPolicyConfig (decoding, validation, defaulting) and runs ONE
// descheduling cycle with upstream's RunDeschedulerStrategies (every profile's deschedule plugins,
// then every profile's balance plugins, the PodEvictor with its limits). Evictions are answered by
// a reactor that does what kube-apiserver's eviction subresource does
// (k8s.io/kubernetes pkg/registry/core/pod/storage/eviction.go):
//
//   - a terminal, Pending or terminating pod is deleted without looking at PodDisruptionBudgets;
//   - two or more PDBs selecting the pod: 500;
//   - one PDB: a not-ready pod is deleted without decrement when the budget is healthy (or the
//     PDB's unhealthyPodEvictionPolicy is AlwaysAllow); otherwise observedGeneration behind → 429,
//     disruptionsAllowed < 0 → 403, == 0 → 429, else the budget is decremented and the pod deleted.
//
// An evicted pod is deleted from the fake cluster, and the reactor returns only once the pods
// informer has seen the deletion, so the rest of the cycle no longer lists it (desched's model:
// docs/design.md, "What a cycle sees after an eviction").
//
// Upstream reads the real clock. Every RFC 3339 timestamp in the snapshot is shifted by
// (time.Now() - --now), so that ages are what they are at desched's --now.
//
// Output (stdout), one JSON document: {"runs": [{"evicted": [...], "refused": [...]}...]}; each
// eviction carries namespace, name, node, profile and plugin (from the eviction's reason
// annotation upstream writes: "triggered by PROFILE/PLUGIN: REASON").
// Bad input: one line on stderr, exit 2.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"regexp"
	goruntime "runtime"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/informers"
	fakeclientset "k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/kubernetes/scheme"
	core "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"sigs.k8s.io/descheduler/cmd/descheduler/app/options"
	"sigs.k8s.io/descheduler/pkg/descheduler"
	"sigs.k8s.io/descheduler/pkg/features"
	"sigs.k8s.io/descheduler/pkg/framework/pluginregistry"
)

type eviction struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	Node      string `json:"node"`
	Profile   string `json:"profile"`
	Plugin    string `json:"plugin"`
	Code      int    `json:"code,omitempty"`
	Reason    string `json:"reason,omitempty"`
}

type runResult struct {
	Evicted []eviction `json:"evicted"`
	Refused []eviction `json:"refused"`
	Error   string     `json:"-"`
}

type output struct {
	Upstream     string      `json:"upstream"`
	Now          string      `json:"now"`
	ShiftSeconds float64     `json:"shiftSeconds"`
	Objects      int         `json:"objects"`
	Runs         []runResult `json:"runs"`
}

func fail(format string, args ...interface{}) {
	fmt.Fprintf(os.Stderr, "upstream-diff: "+format+"\n", args...)
	os.Exit(2)
}

var rfc3339 = regexp.MustCompile(`^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)$`)

// shift moves every RFC 3339 timestamp in a decoded JSON value by d.
func shift(value interface{}, d time.Duration) interface{} {
	switch v := value.(type) {
	case map[string]interface{}:
		for k, x := range v {
			v[k] = shift(x, d)
		}
		return v
	case []interface{}:
		for i, x := range v {
			v[i] = shift(x, d)
		}
		return v
	case string:
		if !rfc3339.MatchString(v) {
			return v
		}
		t, err := time.Parse(time.RFC3339Nano, v)
		if err != nil {
			return v
		}
		return t.Add(d).UTC().Format(time.RFC3339Nano)
	default:
		return v
	}
}

func loadSnapshot(path string, d time.Duration) ([]runtime.Object, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var doc struct {
		Kind  string            `json:"kind"`
		Items []json.RawMessage `json:"items"`
	}
	if err := json.Unmarshal(data, &doc); err != nil {
		return nil, fmt.Errorf("not a JSON v1 List: %v", err)
	}
	decoder := scheme.Codecs.UniversalDeserializer()
	var objects []runtime.Object
	skipped := map[string]int{}
	for i, raw := range doc.Items {
		var generic interface{}
		if err := json.Unmarshal(raw, &generic); err != nil {
			return nil, fmt.Errorf("items[%d]: %v", i, err)
		}
		shifted, err := json.Marshal(shift(generic, d))
		if err != nil {
			return nil, fmt.Errorf("items[%d]: %v", i, err)
		}
		obj, gvk, err := decoder.Decode(shifted, nil, nil)
		if err != nil {
			if runtime.IsNotRegisteredError(err) && gvk != nil {
				skipped[gvk.Kind]++
				continue
			}
			return nil, fmt.Errorf("items[%d]: %v", i, err)
		}
		objects = append(objects, obj)
	}
	for kind, n := range skipped {
		fmt.Fprintf(os.Stderr, "upstream-diff: %d objects of kind %s skipped (not in client-go's scheme)\n", n, kind)
	}
	return objects, nil
}

// podReady is upstream's podutil.IsPodReady (the eviction subresource's "healthy").
func podReady(pod *v1.Pod) bool {
	for _, c := range pod.Status.Conditions {
		if c.Type == v1.PodReady {
			return c.Status == v1.ConditionTrue
		}
	}
	return false
}

var reasonRE = regexp.MustCompile(`^triggered by ([^/]*)/([^:]*): ?(.*)$`)

type evictionAPI struct {
	tracker  core.ObjectTracker
	podStore cache.Store
	mu       sync.Mutex
	result   *runResult
}

func apiStatus(code int32, reason metav1.StatusReason, msg string) error {
	return &apierrors.StatusError{ErrStatus: metav1.Status{Status: metav1.StatusFailure, Code: code, Reason: reason, Message: msg}}
}

var podsGVR = schema.GroupVersionResource{Version: "v1", Resource: "pods"}
var pdbsGVR = schema.GroupVersionResource{Group: "policy", Version: "v1", Resource: "poddisruptionbudgets"}

func (e *evictionAPI) react(action core.Action) (bool, runtime.Object, error) {
	create, ok := action.(core.CreateAction)
	if !ok || action.GetSubresource() != "eviction" {
		return false, nil, nil
	}
	ev, ok := create.GetObject().(*policyv1.Eviction)
	if !ok {
		return true, nil, fmt.Errorf("unexpected eviction object %T", create.GetObject())
	}
	rec := eviction{Namespace: ev.Namespace, Name: ev.Name}
	if m := reasonRE.FindStringSubmatch(ev.Annotations["reason"]); m != nil {
		rec.Profile, rec.Plugin, rec.Reason = m[1], m[2], m[3]
	}
	err := e.evict(ev, &rec)
	e.mu.Lock()
	defer e.mu.Unlock()
	if err != nil {
		if status, ok := err.(*apierrors.StatusError); ok {
			rec.Code = int(status.ErrStatus.Code)
		}
		rec.Reason = err.Error()
		e.result.Refused = append(e.result.Refused, rec)
		return true, nil, err
	}
	e.result.Evicted = append(e.result.Evicted, rec)
	return true, nil, nil
}

func (e *evictionAPI) evict(ev *policyv1.Eviction, rec *eviction) error {
	obj, err := e.tracker.Get(podsGVR, ev.Namespace, ev.Name)
	if err != nil {
		return err
	}
	pod := obj.(*v1.Pod)
	rec.Node = pod.Spec.NodeName
	ignorePDB := pod.Status.Phase == v1.PodSucceeded || pod.Status.Phase == v1.PodFailed ||
		pod.Status.Phase == v1.PodPending || pod.DeletionTimestamp != nil
	if !ignorePDB {
		list, err := e.tracker.List(pdbsGVR, schema.GroupVersionKind{Group: "policy", Version: "v1", Kind: "PodDisruptionBudget"}, pod.Namespace)
		if err != nil {
			return err
		}
		var matching []*policyv1.PodDisruptionBudget
		for i := range list.(*policyv1.PodDisruptionBudgetList).Items {
			pdb := &list.(*policyv1.PodDisruptionBudgetList).Items[i]
			if pdb.Namespace != pod.Namespace {
				continue
			}
			selector, err := metav1.LabelSelectorAsSelector(pdb.Spec.Selector)
			if err != nil || !selector.Matches(labels.Set(pod.Labels)) {
				continue
			}
			matching = append(matching, pdb)
		}
		if len(matching) > 1 {
			return apiStatus(500, metav1.StatusReasonInternalError, "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support.")
		}
		if len(matching) == 1 {
			pdb := matching[0].DeepCopy()
			skipBudget := false
			if !podReady(pod) {
				if pdb.Spec.UnhealthyPodEvictionPolicy != nil && *pdb.Spec.UnhealthyPodEvictionPolicy == policyv1.AlwaysAllow {
					skipBudget = true
				} else if pdb.Status.CurrentHealthy >= pdb.Status.DesiredHealthy && pdb.Status.DesiredHealthy > 0 {
					skipBudget = true
				}
			}
			if !skipBudget {
				switch {
				case pdb.Status.ObservedGeneration < pdb.Generation:
					return apiStatus(429, metav1.StatusReasonTooManyRequests, "Cannot evict pod as it would violate the pod's disruption budget.")
				case pdb.Status.DisruptionsAllowed < 0:
					return apiStatus(403, metav1.StatusReasonForbidden, "pdb disruptions allowed is negative")
				case pdb.Status.DisruptionsAllowed == 0:
					return apiStatus(429, metav1.StatusReasonTooManyRequests, "Cannot evict pod as it would violate the pod's disruption budget.")
				}
				pdb.Status.DisruptionsAllowed--
				if err := e.tracker.Update(pdbsGVR, pdb, pdb.Namespace); err != nil {
					return err
				}
			}
		}
	}
	if err := e.tracker.Delete(podsGVR, pod.Namespace, pod.Name); err != nil {
		return err
	}
	// Wait until the pods informer no longer lists the pod.
	key := pod.Namespace + "/" + pod.Name
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		if _, exists, _ := e.podStore.GetByKey(key); !exists {
			break
		}
		time.Sleep(20 * time.Microsecond)
	}
	// The descheduler's own informer is fed by the same watch broadcast at the same moment; yield
	// so that it catches up too.
	for i := 0; i < 10; i++ {
		goruntime.Gosched()
	}
	return nil
}

func runOnce(policyPath string, objects []runtime.Object) runResult {
	copies := make([]runtime.Object, len(objects))
	for i, o := range objects {
		copies[i] = o.DeepCopyObject()
	}
	client := fakeclientset.NewSimpleClientset(copies...)
	result := runResult{Evicted: []eviction{}, Refused: []eviction{}}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	watcher := informers.NewSharedInformerFactory(client, 0)
	podInformer := watcher.Core().V1().Pods().Informer()
	watcher.Start(ctx.Done())
	watcher.WaitForCacheSync(ctx.Done())

	api := &evictionAPI{tracker: client.Tracker(), podStore: podInformer.GetStore(), result: &result}
	client.PrependReactor("create", "pods", api.react)

	policy, err := descheduler.LoadPolicyConfig(policyPath, client, pluginregistry.PluginRegistry)
	if err != nil {
		fail("policy: %v", err)
	}
	if policy == nil {
		fail("policy: empty")
	}
	rs, err := options.NewDeschedulerServer()
	if err != nil {
		fail("options: %v", err)
	}
	rs.Client = client
	rs.EventClient = client
	rs.DefaultFeatureGates = features.DefaultMutableFeatureGate
	rs.DryRun = false
	rs.DisableMetrics = true
	rs.DeschedulingInterval = 0
	if err := descheduler.RunDeschedulerStrategies(ctx, rs, policy, "policy/v1"); err != nil {
		result.Error = err.Error()
	}
	return result
}

func main() {
	klogFlags := flag.NewFlagSet("klog", flag.ExitOnError)
	klog.InitFlags(klogFlags)
	var policyPath, snapshotPath, nowText string
	var runs, parallel, verbosity int
	flag.StringVar(&policyPath, "policy", "", "DeschedulerPolicy file (descheduler/v1alpha2)")
	flag.StringVar(&snapshotPath, "snapshot", "", "cluster snapshot: a JSON v1 List")
	flag.StringVar(&nowText, "now", "", "the snapshot's clock (RFC 3339), as desched's --now")
	flag.IntVar(&runs, "runs", 1, "descheduling cycles to run, each on a fresh copy of the snapshot")
	flag.IntVar(&parallel, "parallel", 4, "runs at a time")
	flag.IntVar(&verbosity, "v", -1, "upstream's klog verbosity (default: upstream's logs are discarded)")
	flag.Parse()
	if policyPath == "" || snapshotPath == "" || nowText == "" {
		fail("--policy, --snapshot and --now are required")
	}
	if runs < 1 {
		fail("--runs: must be at least 1, got %d", runs)
	}
	if parallel < 1 {
		fail("--parallel: must be at least 1, got %d", parallel)
	}
	if verbosity >= 0 {
		_ = klogFlags.Set("v", fmt.Sprint(verbosity))
	} else {
		_ = klogFlags.Set("logtostderr", "false")
		_ = klogFlags.Set("alsologtostderr", "false")
		_ = klogFlags.Set("stderrthreshold", "FATAL")
		klog.SetOutput(io.Discard)
	}
	now, err := time.Parse(time.RFC3339Nano, nowText)
	if err != nil {
		fail("--now: must be an RFC 3339 time, got %q", nowText)
	}
	d := time.Since(now)
	objects, err := loadSnapshot(snapshotPath, d)
	if err != nil {
		fail("--snapshot %s: %v", snapshotPath, err)
	}
	descheduler.SetupPlugins()
	out := output{Upstream: "sigs.k8s.io/descheduler v0.36.0", Now: nowText, ShiftSeconds: d.Seconds(), Objects: len(objects)}
	// Runs are independent (each its own fake clientset, informers and evictor), so they overlap:
	// most of a run's time is spent waiting for informers to see an eviction.
	results := make([]runResult, runs)
	sem := make(chan struct{}, parallel)
	var wg sync.WaitGroup
	for i := 0; i < runs; i++ {
		wg.Add(1)
		sem <- struct{}{}
		go func(i int) {
			defer wg.Done()
			defer func() { <-sem }()
			results[i] = runOnce(policyPath, objects)
		}(i)
	}
	wg.Wait()
	for _, result := range results {
		if result.Error != "" {
			// e.g. a profile upstream cannot build: the policy is not one upstream runs
			fail("upstream: %s", result.Error)
		}
	}
	out.Runs = results
	enc := json.NewEncoder(os.Stdout)
	if err := enc.Encode(out); err != nil {
		fail("output: %v", err)
	}
}
