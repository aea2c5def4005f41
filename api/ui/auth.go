package ui

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"opsq/api/apikeys"
	"opsq/api/wire"
)

// With API keys on (Config.Keys), the dashboard asks for an admin key once, on its login
// page, and keeps it in a cookie that scripts cannot read (HttpOnly), that no other site's
// page sends (SameSite=Strict) and that only /ui/ receives. Every request checks the key
// again against the instance's cache, so a revoked or expired key stops working within a
// second, as on the API. The pages' scripts read only /ui/ answers; the cookie is no key
// for /v1/, which takes keys in the Authorization header only.

const (
	cookieName = "opsq_ui_key"
	// cookieMaxAge is how long the browser keeps the key: the key's own expiry and its
	// revocation still apply at every request.
	cookieMaxAge = 30 * 24 * time.Hour
)

// authenticate lets through requests whose cookie holds an admin key; without one, a page
// goes to the login page and anything else gets 401.
func (d *dashboard) authenticate(next echo.HandlerFunc) echo.HandlerFunc {
	if d.keys == nil {
		return next
	}
	return func(c echo.Context) error {
		if ck, err := c.Cookie(cookieName); err == nil {
			if caller, err := d.keys.Check(ck.Value); err == nil && caller.Role == apikeys.Admin {
				return next(c)
			}
		}
		r := c.Request()
		if r.Method != http.MethodGet || strings.HasSuffix(r.URL.Path, ".json") || strings.HasSuffix(r.URL.Path, "/progress") {
			c.Response().Header().Set(echo.HeaderWWWAuthenticate, `Bearer realm="opsq"`)
			return c.JSON(http.StatusUnauthorized, wire.ErrorBody{Error: wire.ErrorDetail{Code: "unauthorized",
				Message: "the dashboard needs an admin key: log in at /ui/login"}})
		}
		return c.Redirect(http.StatusSeeOther, "/ui/login?next="+url.QueryEscape(r.URL.RequestURI()))
	}
}

// loginView is the login page.
type loginView struct {
	Next  string
	Error string
}

// nextPage is where to go after the login: a page of the dashboard, nothing else.
func nextPage(next string) string {
	if !strings.HasPrefix(next, "/ui/") || strings.HasPrefix(next, "/ui//") || strings.ContainsAny(next, "\\\r\n") {
		return "/ui/"
	}
	return next
}

func (d *dashboard) loginPage(c echo.Context) error {
	if d.keys == nil {
		return c.Redirect(http.StatusSeeOther, "/ui/")
	}
	return d.render(c, http.StatusOK, "login", page{Title: "Log in", Data: loginView{Next: nextPage(c.QueryParam("next"))}})
}

func (d *dashboard) login(c echo.Context) error {
	if d.keys == nil {
		return c.Redirect(http.StatusSeeOther, "/ui/")
	}
	v := loginView{Next: nextPage(c.FormValue("next"))}
	key := strings.TrimSpace(c.FormValue("key"))
	caller, err := d.keys.Check(key)
	switch {
	case key == "":
		v.Error = "enter an admin key (opsq keys create --name NAME --role admin prints one)"
	case errors.Is(err, apikeys.ErrUnknown):
		v.Error = "unknown API key"
	case err != nil:
		v.Error = err.Error() // names the key, never the key itself
	case caller.Role != apikeys.Admin:
		v.Error = fmt.Sprintf("the key %q has the role %s; the dashboard needs an admin key", caller.Name, caller.Role)
	}
	if v.Error != "" {
		// The form, again, with what was wrong: a page that loaded, 200.
		return d.render(c, http.StatusOK, "login", page{Title: "Log in", Data: v})
	}
	c.SetCookie(&http.Cookie{Name: cookieName, Value: key, Path: "/ui/", MaxAge: int(cookieMaxAge / time.Second),
		HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: c.IsTLS()})
	d.log.InfoContext(c.Request().Context(), "dashboard login", "key", caller.Name)
	return c.Redirect(http.StatusSeeOther, v.Next)
}

func (d *dashboard) logout(c echo.Context) error {
	c.SetCookie(&http.Cookie{Name: cookieName, Value: "", Path: "/ui/", MaxAge: -1,
		HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: c.IsTLS()})
	return c.Redirect(http.StatusSeeOther, "/ui/login")
}
