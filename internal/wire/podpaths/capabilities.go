package podpaths

// CRIOReclaimCapabilities are what the remover holds, beside root, where
// it reclaims CRI-O's leftovers: an image's directories belong to its
// users, with modes that keep root out without CAP_DAC_OVERRIDE, and
// sticky directories' entries to their owners (CAP_FOWNER). Nothing is
// mounted or unmounted: no CAP_SYS_ADMIN.
var CRIOReclaimCapabilities = []string{"DAC_OVERRIDE", "FOWNER"}
