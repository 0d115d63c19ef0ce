package extract

import (
	"fmt"
	"io"
	"path"
	"strings"

	"github.com/mcpsearch/mcpsearch/extract/internal/archive"
	"github.com/mcpsearch/mcpsearch/extract/internal/xmlsafe"
)

// odfTypes maps the "mimetype" entry of an OpenDocument file or an e-book
// to the media type it is read as.
var odfTypes = map[string]string{
	MIMEODT: MIMEODT,
	"application/vnd.oasis.opendocument.text-template": MIMEODT,
	"application/vnd.oasis.opendocument.text-master":   MIMEODT,
	"application/vnd.oasis.opendocument.text-web":      MIMEODT,
	MIMEODP: MIMEODP,
	"application/vnd.oasis.opendocument.presentation-template": MIMEODP,
	MIMEODS: MIMEODS,
	"application/vnd.oasis.opendocument.spreadsheet-template": MIMEODS,
	MIMEEPUB: MIMEEPUB,
}

// odfUnsupported names the OpenDocument kinds that hold no running text.
var odfUnsupported = map[string]string{
	"application/vnd.oasis.opendocument.graphics":          "OpenDocument drawing (.odg): export it as PDF and upload that",
	"application/vnd.oasis.opendocument.graphics-template": "OpenDocument drawing template (.otg): export it as PDF and upload that",
	"application/vnd.oasis.opendocument.formula":           "OpenDocument formula (.odf)",
	"application/vnd.oasis.opendocument.chart":             "OpenDocument chart (.odc)",
	"application/vnd.oasis.opendocument.image":             "OpenDocument image (.odi)",
	"application/vnd.oasis.opendocument.base":              "OpenDocument database (.odb): export its tables as CSV and upload those",
}

// ooxmlTypes maps the content type of an Office Open XML package's main
// part to the media type it is read as. Macro-enabled documents, templates
// and slide shows are read as their plain kind: their macros are ignored.
var ooxmlTypes = map[string]string{
	"application/vnd.openxmlformats-officedocument.wordprocessingml.document.main+xml":   MIMEDOCX,
	"application/vnd.openxmlformats-officedocument.wordprocessingml.template.main+xml":   MIMEDOCX,
	"application/vnd.ms-word.document.macroenabled.main+xml":                             MIMEDOCX,
	"application/vnd.ms-word.template.macroenabledtemplate.main+xml":                     MIMEDOCX,
	"application/vnd.openxmlformats-officedocument.spreadsheetml.sheet.main+xml":         MIMEXLSX,
	"application/vnd.openxmlformats-officedocument.spreadsheetml.template.main+xml":      MIMEXLSX,
	"application/vnd.ms-excel.sheet.macroenabled.main+xml":                               MIMEXLSX,
	"application/vnd.ms-excel.template.macroenabled.main+xml":                            MIMEXLSX,
	"application/vnd.openxmlformats-officedocument.presentationml.presentation.main+xml": MIMEPPTX,
	"application/vnd.openxmlformats-officedocument.presentationml.slideshow.main+xml":    MIMEPPTX,
	"application/vnd.openxmlformats-officedocument.presentationml.template.main+xml":     MIMEPPTX,
	"application/vnd.ms-powerpoint.presentation.macroenabled.main+xml":                   MIMEPPTX,
	"application/vnd.ms-powerpoint.slideshow.macroenabled.main+xml":                      MIMEPPTX,
	"application/vnd.ms-powerpoint.template.macroenabled.main+xml":                       MIMEPPTX,
}

// ooxmlUnsupported says why the Office packages that hold no document are
// refused, by their main part's content type.
var ooxmlUnsupported = map[string]string{
	"application/vnd.ms-excel.sheet.binary.macroenabled.main":           "Excel binary workbook (.xlsb): save it as .xlsx and upload that",
	"application/vnd.ms-excel.addin.macroenabled.main+xml":              "Excel add-in (.xlam): it holds only macros, which are not read; upload a workbook or a document instead",
	"application/vnd.ms-powerpoint.addin.macroenabled.main+xml":         "PowerPoint add-in (.ppam): it holds only macros, which are not read; upload a presentation instead",
	"application/vnd.ms-visio.drawing.main+xml":                         "Visio drawing (.vsdx): export it as PDF and upload that",
	"application/vnd.ms-visio.drawing.macroenabled.main+xml":            "Visio drawing (.vsdm): export it as PDF and upload that",
	"application/vnd.openxmlformats-officedocument.drawingml.chart+xml": "",
}

// containerByName returns the media type a file name's extension gives a
// ZIP-based document, "" for none.
func containerByName(name string) string {
	switch strings.ToLower(path.Ext(name)) {
	case ".docx", ".docm", ".dotx", ".dotm":
		return MIMEDOCX
	case ".xlsx", ".xlsm", ".xltx", ".xltm":
		return MIMEXLSX
	case ".pptx", ".pptm", ".ppsx", ".ppsm", ".potx", ".potm":
		return MIMEPPTX
	case ".odt", ".ott":
		return MIMEODT
	case ".odp", ".otp":
		return MIMEODP
	case ".ods", ".ots":
		return MIMEODS
	case ".epub":
		return MIMEEPUB
	}
	return ""
}

// isContainer reports the media types whose files are ZIP containers.
func isContainer(mt string) bool {
	switch mt {
	case MIMEDOCX, MIMEXLSX, MIMEPPTX, MIMEODT, MIMEODP, MIMEODS, MIMEEPUB:
		return true
	}
	return false
}

// classifyZip returns the media type of the document in a, judged from its
// content: the "mimetype" entry of OpenDocument files and e-books, the
// main part's content type in [Content_Types].xml for Office Open XML
// files, and the well-known entry names when those are missing.
func classifyZip(a *archive.Archive) (string, error) {
	if a.Has("mimetype") && a.Size("mimetype") < 256 {
		b, err := a.ReadAll("mimetype")
		if err == nil {
			mt := strings.TrimSpace(string(b))
			if t, ok := odfTypes[mt]; ok {
				return t, nil
			}
			if why, ok := odfUnsupported[mt]; ok {
				return "", fmt.Errorf("%w: %s", ErrUnsupported, why)
			}
		}
	}
	if a.Has("[Content_Types].xml") {
		mt, err := classifyOOXML(a)
		if mt != "" || err != nil {
			return mt, err
		}
	}
	switch {
	case a.Has("word/document.xml"):
		return MIMEDOCX, nil
	case a.Has("xl/workbook.xml"):
		return MIMEXLSX, nil
	case a.Has("ppt/presentation.xml"):
		return MIMEPPTX, nil
	case a.Has("META-INF/container.xml"):
		return MIMEEPUB, nil
	case a.Has("content.xml") && a.Has("META-INF/manifest.xml"):
		return classifyODFManifest(a)
	}
	return "", fmt.Errorf("%w: ZIP archive (not an Office, OpenDocument or EPUB file)", ErrUnsupported)
}

// classifyOOXML reads the content types of the package's parts and returns
// the type of its main part; "" when no part is a main document part.
func classifyOOXML(a *archive.Archive) (string, error) {
	rc, err := a.Open("[Content_Types].xml")
	if err != nil {
		return "", containerError(err)
	}
	defer rc.Close()
	root, err := xmlsafe.Parse(io.LimitReader(rc, 16<<20), "[Content_Types].xml")
	if err != nil {
		return "", containerError(err)
	}
	for _, o := range root.Children("Override") {
		ct := strings.ToLower(strings.TrimSpace(o.A("ContentType")))
		if mt, ok := ooxmlTypes[ct]; ok {
			return mt, nil
		}
		if why, ok := ooxmlUnsupported[ct]; ok && why != "" {
			return "", fmt.Errorf("%w: %s", ErrUnsupported, why)
		}
	}
	return "", nil
}

// classifyODFManifest reads the media type an OpenDocument manifest gives
// the package itself, for files that lack the "mimetype" entry.
func classifyODFManifest(a *archive.Archive) (string, error) {
	rc, err := a.Open("META-INF/manifest.xml")
	if err != nil {
		return "", containerError(err)
	}
	defer rc.Close()
	root, err := xmlsafe.Parse(io.LimitReader(rc, 16<<20), "META-INF/manifest.xml")
	if err != nil {
		return "", containerError(err)
	}
	for _, e := range root.Children("file-entry") {
		if e.A("full-path") == "/" {
			if t, ok := odfTypes[e.A("media-type")]; ok {
				return t, nil
			}
		}
	}
	return "", fmt.Errorf("%w: ZIP archive (not an Office, OpenDocument or EPUB file)", ErrUnsupported)
}
