package projected

import (
	"context"
	"errors"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestRequiresRefresh(t *testing.T) {
	issued := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	token := func(exp int64) *authenticationv1.TokenRequest {
		return &authenticationv1.TokenRequest{
			Spec:   authenticationv1.TokenRequestSpec{ExpirationSeconds: &exp},
			Status: authenticationv1.TokenRequestStatus{Token: "t", ExpirationTimestamp: metav1.NewTime(issued.Add(time.Duration(exp) * time.Second))},
		}
	}
	for _, tc := range []struct {
		name   string
		exp    int64
		age    time.Duration
		jitter time.Duration
		want   bool
	}{
		{name: "fresh", exp: 3600, age: time.Minute, want: false},
		{name: "just before 80%", exp: 3600, age: 48*time.Minute - time.Second, want: false},
		{name: "just after 80%", exp: 3600, age: 48*time.Minute + time.Second, want: true},
		{name: "jitter brings it forward", exp: 3600, age: 48*time.Minute - 5*time.Second, jitter: 9 * time.Second, want: true},
		{name: "jitter not enough", exp: 3600, age: 48*time.Minute - 10*time.Second, jitter: 9 * time.Second, want: false},
		{name: "10 minute token at 8 minutes", exp: 600, age: 8*time.Minute + time.Second, want: true},
		{name: "2 day token before 24h", exp: 2 * 86400, age: 24*time.Hour - time.Second, want: false},
		{name: "2 day token after 24h", exp: 2 * 86400, age: 24*time.Hour + time.Second, want: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := requiresRefresh(token(tc.exp), issued.Add(tc.age), tc.jitter); got != tc.want {
				t.Errorf("requiresRefresh(%ds token, age %v, jitter %v) = %v, want %v", tc.exp, tc.age, tc.jitter, got, tc.want)
			}
		})
	}
	if requiresRefresh(&authenticationv1.TokenRequest{}, issued, 0) {
		t.Error("a token without expirationSeconds requires a refresh")
	}
}

func TestTokensCache(t *testing.T) {
	now := time.Now()
	calls := 0
	var fail error
	tk := &tokens{create: func(_ context.Context, ns, sa string, tr *authenticationv1.TokenRequest) (*authenticationv1.TokenRequest, error) {
		calls++
		if fail != nil {
			return nil, fail
		}
		out := tr.DeepCopy()
		out.Status = authenticationv1.TokenRequestStatus{Token: "t", ExpirationTimestamp: metav1.NewTime(now.Add(time.Hour))}
		return out, nil
	}}
	a := tokenKey{namespace: "ns", serviceAccount: "sa", expirationSeconds: 3600, podName: "a", podUID: "uid-a"}
	b := a
	b.podName, b.podUID = "b", "uid-b"
	for _, k := range []tokenKey{a, a, b} {
		if _, err := tk.get(t.Context(), k); err != nil {
			t.Fatal(err)
		}
	}
	if calls != 2 || tk.len() != 2 {
		t.Errorf("%d requests, %d cached; want 2 and 2", calls, tk.len())
	}
	tk.forget("uid-a")
	if tk.len() != 1 {
		t.Errorf("%d cached after forgetting a pod, want 1", tk.len())
	}
	fail = errors.New("down")
	if _, err := tk.get(t.Context(), a); err == nil {
		t.Error("get without a cached token succeeded while requests fail")
	}
}
