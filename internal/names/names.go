// Package names holds the names the operator shares with its users and between its packages:
// condition types and reasons, Event reasons, the labels of Helm's release records and the label
// of every release object. Users read them in `kubectl describe`, alerts and scripts; each is
// written here once.
package names

import "k8s.io/apimachinery/pkg/labels"

// ManagedLabel is on every object of every release, so that the operator's caches hold only
// those objects: the Helm reconciler watches each kind its releases render to correct drift,
// and controller-runtime caches every object of a watched kind in the watched namespaces (all
// ConfigMaps of the cluster when watching all namespaces). Its value is ManagedValue when the
// operator is not sharded (and in the default shard); a named shard's objects carry its name
// (package shard), so that each shard caches only its own. Package helmconfig sets it.
const (
	ManagedLabel = "myproxy-operator.gateway.example.com/managed"
	ManagedValue = "true"
)

// Annotations the operator writes on custom resources of a kind that declares versions (package
// conversion): ConversionAnnotation keeps the spec fields the version a resource is read at has
// no place for, until it is read at one that has; StoredVersionAnnotation says the storage
// migration rewrote the resource at that version, so that a restarted migration skips it.
const (
	ConversionAnnotation    = "myproxy-operator.gateway.example.com/conversion"
	StoredVersionAnnotation = "myproxy-operator.gateway.example.com/stored-version"
)

// ManagedSelector selects the release objects labelled with value.
func ManagedSelector(value string) labels.Selector {
	return labels.SelectorFromSet(labels.Set{ManagedLabel: value})
}

// Condition types. helm-operator-plugins' reconciler sets the first five; the status
// controller sets Ready (kind.yaml may declare more, never one of these).
const (
	ConditionInitialized    = "Initialized"
	ConditionDeployed       = "Deployed"
	ConditionReleaseFailed  = "ReleaseFailed"
	ConditionIrreconcilable = "Irreconcilable"
	ConditionPaused         = "Paused"
	ConditionReady          = "Ready"
	// ConditionRolloutHeld is True on a resource whose upgrade a halted rollout holds back
	// (package rollout); the status controller sets it, and removes it when the hold ends.
	ConditionRolloutHeld = "RolloutHeld"
)

// Reasons of the Ready condition.
const (
	ReasonObjectsReady      = "ObjectsReady"
	ReasonObjectsInProgress = "ObjectsInProgress"
	ReasonObjectsFailed     = "ObjectsFailed"
	ReasonNotDeployed       = "ReleaseNotDeployed"
)

// Event reasons, one per outcome of a Helm action.
const (
	ReasonInstalled     = "Installed"
	ReasonInstallFailed = "InstallFailed"
	ReasonUpgraded      = "Upgraded"
	ReasonUpgradeFailed = "UpgradeFailed"
	// ReasonValuesRecorded: a release upgraded only so that its record holds the resource's
	// values, which render the objects it has.
	ReasonValuesRecorded        = "ValuesRecorded"
	ReasonReleaseCheckFailed    = "ReleaseCheckFailed"
	ReasonUninstalled           = "Uninstalled"
	ReasonUninstallFailed       = "UninstallFailed"
	ReasonDriftCorrectionFailed = "DriftCorrectionFailed"
	ReasonReleaseLookupFailed   = "ReleaseLookupFailed"
	ReasonActionClientFailed    = "ActionClientFailed"
	ReasonUninstallWaiting      = "UninstallWaiting"
	// ReasonReleaseUnlocked: a release freed from a pending state an interrupted action left.
	ReasonReleaseUnlocked = "ReleaseUnlocked"
	// ReasonRolledBack: a failed upgrade rolled back to the revision that last deployed;
	// ReasonRollbackFailed: that rollback failed too.
	ReasonRolledBack     = "RolledBack"
	ReasonRollbackFailed = "RollbackFailed"
	// ReasonFailedInstallRemoved: a failed install uninstalled, to be installed afresh.
	ReasonFailedInstallRemoved = "FailedInstallRemoved"
	// ReasonUpgradeHeld: an upgrade to a new chart waits for its wave of the rollout.
	ReasonUpgradeHeld = "UpgradeHeld"
	// ReasonClaimFailed: this shard could not write its claim on a resource.
	ReasonClaimFailed = "ClaimFailed"
	// ReasonShardHandedOver: a shard stopped acting on a resource relabelled for another shard.
	ReasonShardHandedOver = "ShardHandedOver"
	// ReasonRolloutHalted: a rollout of a new chart stopped past its failure budget (the
	// Event on each failed release, the reason of RolloutHeld).
	ReasonRolloutHalted = "RolloutHalted"
	// ReasonRolloutResumed: an administrator resumed a halted rollout (the Event on each
	// release admitted again).
	ReasonRolloutResumed = "RolloutResumed"
)

// Event reasons of what stops a reconcile before any Helm action.
const (
	// ReasonInvalidSpec: a spec that passed the schema but cannot be used (a value check failed).
	ReasonInvalidSpec = "InvalidSpec"
	// ReasonInvalidAnnotation: an annotation value that cannot be used.
	ReasonInvalidAnnotation = "InvalidAnnotation"
	// ReasonReconcilePaused and ReasonReconcileResumed follow the pause-reconcile annotation.
	ReasonReconcilePaused  = "ReconcilePaused"
	ReasonReconcileResumed = "ReconcileResumed"
)

// Helm's ownership metadata, which Helm writes on every object of a release and checks before
// it takes over an existing object: an object whose annotations name another release is that
// release's.
const (
	HelmReleaseNameAnnotation      = "meta.helm.sh/release-name"
	HelmReleaseNamespaceAnnotation = "meta.helm.sh/release-namespace"
	HelmManagedByLabel             = "app.kubernetes.io/managed-by"
	HelmManagedByValue             = "Helm"
)

// Labels Helm's Secret storage driver puts on every release record.
const (
	RecordOwnerLabel = "owner"
	RecordOwnerHelm  = "helm"
	RecordNameLabel  = "name"
)

// Status fields every kind has. helm-operator-plugins' reconciler writes the first two (its
// status updater writes status as exactly these); the status controller writes
// observedGeneration. A chart's kind.yaml may declare none of them.
const (
	StatusConditions         = "conditions"
	StatusDeployedRelease    = "deployedRelease"
	StatusObservedGeneration = "observedGeneration"
	// DeployedReleaseManifest is the field of deployedRelease where helm-operator-plugins puts the
	// release's manifest; the operator leaves it out of status (status.PluginWrites).
	DeployedReleaseManifest = "manifest"
)

// The uninstall finalizer. helm-operator-plugins' reconciler works with ReconcilerFinalizer, a
// name that is not domain-qualified (the apiserver warns about it); custom resources store
// UninstallFinalizer instead, the name operator-sdk's helm-operator uses, so that resources
// move between the two operators in either direction (reconcilerclient.go).
const (
	UninstallFinalizer  = "helm.sdk.operatorframework.io/uninstall-release"
	ReconcilerFinalizer = "uninstall-helm-release"
)

// The custom resource annotations users of the stock operator-sdk helm-operator and of
// helm-operator-plugins know, on every watched kind: the names are theirs, and so are the
// meanings (docs/configuration.md lists them). The plugins' reconciler applies the install,
// upgrade and uninstall options itself once it is given their sets (package controller); the
// pause annotation goes through its pause handler. What the plugins lack (rollback-force,
// uninstall-wait, reconcile-period) is applied by the action client and a post-reconcile hook.

// Domain is operator-sdk's annotation domain.
const Domain = "helm.sdk.operatorframework.io"

// The annotations, as operator-sdk and helm-operator-plugins name them. PauseReconcile is this
// operator's choice of name for the plugins' pause handler (operator-sdk has none).
const (
	UpgradeForce          = Domain + "/upgrade-force"
	RollbackForce         = Domain + "/rollback-force"
	UninstallWait         = Domain + "/uninstall-wait"
	ReconcilePeriod       = Domain + "/reconcile-period"
	InstallDisableHooks   = Domain + "/install-disable-hooks"
	UpgradeDisableHooks   = Domain + "/upgrade-disable-hooks"
	UninstallDisableHooks = Domain + "/uninstall-disable-hooks"
	InstallDescription    = Domain + "/install-description"
	UpgradeDescription    = Domain + "/upgrade-description"
	UninstallDescription  = Domain + "/uninstall-description"
	PauseReconcile        = Domain + "/pause-reconcile"
)

// AnnotationSet is an action that annotations change, as the annotations that change it.
type AnnotationSet []string

// The actions annotations change.
var (
	ForInstall   = AnnotationSet{InstallDisableHooks, InstallDescription}
	ForUpgrade   = AnnotationSet{UpgradeForce, UpgradeDisableHooks, UpgradeDescription, RollbackForce}
	ForUninstall = AnnotationSet{UninstallDisableHooks, UninstallDescription, UninstallWait}
)
