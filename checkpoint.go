package nodekit

import (
	"path/filepath"

	"github.com/nodekit/nodekit/sources/apiserver"
)

// apiCheckpointFile is where the agent keeps the API server's pods for the
// node, below its RootDir.
const apiCheckpointFile = "checkpoints/apiserver-pods.json"

// withCheckpoint gives the API-server source a checkpoint under the
// agent's RootDir unless its options name one: an agent restarted while
// the API server is unreachable then runs the pods the server last gave it
// (see apiserver.Options.CheckpointPath), where the kubelet runs none of
// them until the server answers.
func withCheckpoint(o apiserver.Options, rootDir string) apiserver.Options {
	if o.CheckpointPath == "" {
		o.CheckpointPath = filepath.Join(rootDir, apiCheckpointFile)
	}
	return o
}
