package retention

// Under disk pressure a real run removes by measurement: batches from the
// head of the disk policy's queue, the image filesystem measured after
// each. What a removal frees is not its image's size: layers shared with
// kept images free nothing, and containerd keeps each layer twice (the
// blob, and its unpacked snapshot, larger still when the blob is
// compressed). So batches are sized with a ratio of bytes freed per byte
// of image size that errs high, and a batch's estimate never goes past
// what is still needed except by its last image: if the ratio holds, the
// drain stops within one image of the target, and near it removes one
// image at a time.

// AssumedFreedRatio is the ratio assumed where nothing says less: a
// layer's blob and its unpacked copy. A measured ratio lower than it is
// not trusted for later batches: a batch's ratio is an average, and the
// next images may share less with what stays.
const AssumedFreedRatio = 2.0

// FirstFreedRatio is the ratio the first batch is sized with, before any
// measurement: gzip'd layers commonly unpack to two or three times their
// size, so an image can free up to four times the size a runtime reports
// for its compressed content.
const FirstFreedRatio = 2 * AssumedFreedRatio

// FreedRatio is the ratio the next batch is sized with, given the highest
// bytes-freed-per-byte-of-size ratio measured so far (measured: whether
// any batch has been measured yet).
func FreedRatio(highest float64, measured bool) float64 {
	if !measured {
		return FirstFreedRatio
	}
	return max(AssumedFreedRatio, highest)
}

// NextBatch is how many images, from the head of sizes (the disk policy's
// queue), to remove next so that need bytes are freed, each image
// estimated to free ratio times its size: the fewest whose estimate
// reaches need, all of them when none does. So every image of a batch but
// its last is needed by the estimate, and when the ratio is not below the
// truth, removing one image fewer would not have freed need. It is at
// least one (a need of zero still takes one image: the caller asks only
// while above the target), at most len(sizes).
func NextBatch(sizes []uint64, need uint64, ratio float64) int {
	if len(sizes) == 0 {
		return 0
	}
	var est float64
	for k, size := range sizes {
		est += float64(size) * ratio
		if est >= float64(need) {
			return k + 1
		}
	}
	return len(sizes)
}
