package cgroup_test

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

func metaOf(uid string) metav1.ObjectMeta {
	return metav1.ObjectMeta{Name: "pod-" + uid, Namespace: "default", UID: types.UID(uid)}
}
