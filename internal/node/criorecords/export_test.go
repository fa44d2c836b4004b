package criorecords

// Parse is parse, for the fuzzer: the records of a store's files (images,
// layers, volatile layers, containers, volatile containers), I/O aside.
func Parse(driver string, images, layers, volatileLayers, containers, volatileContainers []byte) (Records, error) {
	return parse(driver, files{images, layers, volatileLayers, containers, volatileContainers})
}

// LayerDiskBytesWithin is LayerDiskBytes within other limits.
var LayerDiskBytesWithin = layerDiskBytes
