// Package volumetest helps test volume plugins and the code that uses
// them: PluginSuite, the conformance tests every volume.Plugin must pass,
// and FakePlugin, a recording plugin with injectable failures.
//
// # Usage
//
//	func TestConformance(t *testing.T) {
//		volumetest.PluginSuite(t, func(t *testing.T) volumetest.Fixture {
//			return volumetest.Fixture{
//				Plugin:  myplugin.New(...),
//				Volumes: []v1.Volume{{Name: "data", VolumeSource: ...}},
//			}
//		})
//	}
package volumetest
