// Package volume will hold the volume plugins (hostPath, emptyDir, ...) and
// the volume manager, which keeps the volumes of the pods that should run set
// up and tears down the others. For now it declares the interfaces the agent
// programs against.
package volume
