package config

import (
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/eraser-oss/eraser/internal/wire/endpoint"
)

// The runtime's name and addresses: v1alpha1 and v1alpha2 name it, v1alpha3
// gives {name, address}, and windowsAddress is ours.

func (c *converter) runtimeName(p *field.Path, name string) {
	if name == "" {
		name = string(RuntimeContainerd)
	}
	addr, ok := defaultRuntimeAddresses[RuntimeName(name)]
	if !ok {
		c.errs = append(c.errs, field.NotSupported(p, name, runtimeNames()))
		return
	}
	c.cfg.Manager.Runtime = Runtime{Name: RuntimeName(name), Address: addr}
}

func (c *converter) runtime(p *field.Path, rt *runtimeDoc) {
	switch {
	case rt == nil || (rt.Name == "" && rt.Address == ""):
		c.runtimeName(p.Child("name"), "")
		if rt != nil {
			c.windowsAddress(p.Child("windowsAddress"), rt.WindowsAddress)
		}
	case rt.Name == "":
		c.errs = append(c.errs, field.Required(p.Child("name"), "a runtime address needs the runtime's name"))
	default:
		c.runtimeName(p.Child("name"), rt.Name)
		c.windowsAddress(p.Child("windowsAddress"), rt.WindowsAddress)
		if rt.Address == "" {
			return
		}
		s, warning, err := runtimeAddress(rt.Address)
		if err != nil {
			c.errs = append(c.errs, field.Invalid(p.Child("address"), rt.Address, err.Error()))
			return
		}
		if warning != "" {
			c.warn(p.Child("address"), warning)
		}
		addr, err := endpoint.Parse(s)
		if err != nil {
			c.errs = append(c.errs, field.Invalid(p.Child("address"), rt.Address, err.Error()))
			return
		}
		c.cfg.Manager.Runtime.Address = addr.String()
	}
}

func (c *converter) windowsAddress(p *field.Path, s string) {
	if s == "" {
		return
	}
	addr, err := endpoint.Parse(s)
	switch {
	case err != nil:
		c.errs = append(c.errs, field.Invalid(p, s, err.Error()))
	case addr.Scheme != endpoint.NamedPipe:
		c.errs = append(c.errs, field.Invalid(p, s, "must be a named pipe, npipe://./pipe/<name>"))
	default:
		c.cfg.Manager.Runtime.WindowsAddress = addr.String()
	}
}

func runtimeNames() []string {
	return []string{string(RuntimeContainerd), string(RuntimeDockershim), string(RuntimeCrio)}
}
